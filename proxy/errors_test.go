package proxy

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/homes"
)

// TestEntryErrors is the entry's own error answers (docs/REFERENCE.md: error codes, and CORS), a
// row per error: status, code and message, the JSON body with the request id, and the headers
// every one of them carries.
func TestEntryErrors(t *testing.T) {
	table, err := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	h, err := New(Config{Regions: []Region{{Name: "eu", Routers: []*url.URL{u}}}, Homes: table,
		CORS: "https://app.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tests := map[string]struct {
		e      entryError
		status int
		code   string
		msg    string
	}{
		"bad_path": {entryBadPath, 400, "bad_path",
			"The path must hold no NUL, and under /t/ name a tenant: /t/<tenant>/..., at most 255 bytes."},
		"overloaded: in flight": {entryOverloaded, 503, "overloaded",
			"Too many requests in flight at this entry; try again shortly."},
		"overloaded: no room for a body": {entryNoBodyRoom, 503, "overloaded",
			"No room at this entry to buffer a request body without a length; try again shortly."},
		"length_required": {entryLengthRequired, 411, "length_required",
			"A request body longer than the entry's body buffer needs a Content-Length."},
		"may_have_run": {entryMayHaveRun, 502, "may_have_run",
			"The router failed after the request may have reached it; it was not sent again. " +
				"Retry with an Idempotency-Key to make it safe to repeat."},
		"no_region_reachable": {entryNoRegionReachable, 502, "no_region_reachable",
			"No region could be reached for this request."},
	}
	if len(tests) != len(entryErrors) {
		t.Fatalf("%d rows here for %d entry errors: each needs its row", len(tests), len(entryErrors))
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/t/acme/items", nil)
			r.Header.Set("Origin", "https://app.example")
			r.Header.Set("X-Request-Id", "req-7")
			w := httptest.NewRecorder()
			x := exchange{rt: h.rt.Load(), region: -1}
			h.writeError(w, r, &x, tt.e)

			if w.Code != tt.status || x.status != tt.status || x.result != tt.code {
				t.Errorf("status %d, exchange %d %q; want %d %q", w.Code, x.status, x.result, tt.status, tt.code)
			}
			if h.met.requests[x.result] == nil {
				t.Errorf("result %q is not a label of fenec_entry_requests_total: the request goes uncounted", x.result)
			}
			var b errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if body := w.Body.String(); !strings.HasSuffix(body, "}\n") {
				t.Errorf("body %q does not end with a newline: a shell prompt runs into it", body)
			}
			if b != (errorBody{Error: tt.code, Message: tt.msg, RequestID: "req-7"}) {
				t.Errorf("body = %+v", b)
			}
			want := map[string]string{
				"Content-Type":                "application/json",
				"Cache-Control":               "no-store",
				"X-Request-Id":                "req-7",
				"Access-Control-Allow-Origin": "https://app.example",
				"Vary":                        "Origin",
			}
			for k, v := range want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// The entry's errors carry CORS headers only for an origin --cors allows, and the request id
// the entry made up when the client sent none.
func TestEntryErrorHeaders(t *testing.T) {
	table, err := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, cors := range []string{"", "https://app.example"} {
		h, err := New(Config{Regions: []Region{{Name: "eu", Routers: []*url.URL{u}}}, Homes: table, CORS: cors})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		r := httptest.NewRequest("GET", "/t//x", nil)
		r.Header.Set("Origin", "https://evil.example")
		w := httptest.NewRecorder()
		x := exchange{rt: h.rt.Load(), region: -1}
		x.head.requestID = "made-1"
		h.writeError(w, r, &x, entryBadPath)
		if v := w.Header().Values("Access-Control-Allow-Origin"); len(v) != 0 {
			t.Errorf("--cors %q, foreign origin: Access-Control-Allow-Origin %q", cors, v)
		}
		if v := w.Header().Get("X-Request-Id"); v != "made-1" {
			t.Errorf("--cors %q: X-Request-Id %q, want the entry's made-1", cors, v)
		}
		var b errorBody
		if json.Unmarshal(w.Body.Bytes(), &b); b.RequestID != "made-1" {
			t.Errorf("--cors %q: body %q lacks the request id", cors, w.Body)
		}
	}
}
