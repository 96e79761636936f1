package standin

import (
	"testing"
)

func preflightReq(url, origin string) req {
	return req{method: "OPTIONS", url: url, header: map[string]string{
		"Origin":                         origin,
		"Access-Control-Request-Method":  "PUT",
		"Access-Control-Request-Headers": "content-type, idempotency-key",
		hdrHome:                          "1",
	}}
}

func TestCORSPreflight(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.CORS = "https://a.example, https://b.example" })
	client := newClient(t)
	a := do(t, client, preflightReq(c.url("us", 0)+"/t/acme/items", "https://b.example"))
	want := map[string]string{
		"Access-Control-Allow-Origin":  "https://b.example",
		"Access-Control-Allow-Methods": "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
		"Access-Control-Allow-Headers": "content-type, idempotency-key",
		"Access-Control-Max-Age":       "600",
		"Vary":                         "Origin",
		hdrShard:                       "1",
		hdrHome:                        "eu",
	}
	if a.status != 204 {
		t.Errorf("preflight: %d, want 204", a.status)
	}
	for k, v := range want {
		if got := a.header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("preflight %s = %q, want %q", k, got, v)
		}
	}
	// Answered by the router the client reached: no relay.
	if n := len(seenWhere(c, func(s Seen) bool { return s.Region == "eu" })); n != 0 {
		t.Errorf("the home saw %d requests, want 0", n)
	}

	a = do(t, client, preflightReq(c.url("eu", 0)+"/t/acme/items", "https://evil.example"))
	if a.status != 204 || a.header.Get("Access-Control-Allow-Origin") != "" || a.header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("preflight from another origin: %d %v, want 204 without Access-Control-*", a.status, a.header)
	}

	star := startCluster(t, func(cfg *Config) { cfg.CORS = "*" })
	a = do(t, client, preflightReq(star.url("eu", 0)+"/t/acme/items", "https://any.example"))
	if a.status != 204 || a.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight with *: %d %v", a.status, a.header)
	}
}

func TestCORSOnAnswersOnce(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.CORS = "https://a.example" })
	client := newClient(t)
	for _, url := range []string{
		c.url("eu", 0) + "/t/acme/echo",       // answered at the home
		c.url("us", 0) + "/t/acme/echo",       // relayed
		c.url("us", 0) + "/t/acme/items/none", // a relayed refusal
		c.url("us", 0) + "/t/nobody/echo",     // the router's own refusal
	} {
		a := do(t, client, req{url: url, header: map[string]string{"Origin": "https://a.example"}})
		if got := a.header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != "https://a.example" {
			t.Errorf("%s: Access-Control-Allow-Origin = %q, want one", url, got)
		}
		if got := a.header.Values("Vary"); len(got) != 1 || got[0] != "Origin" {
			t.Errorf("%s: Vary = %q, want Origin once", url, got)
		}
		a = do(t, client, req{url: url, header: map[string]string{"Origin": "https://evil.example"}})
		if got := a.header.Values("Access-Control-Allow-Origin"); len(got) != 0 {
			t.Errorf("%s from another origin: Access-Control-Allow-Origin = %q", url, got)
		}
	}
}

func TestCORSOffIsNotAPreflight(t *testing.T) {
	c := startCluster(t, nil)
	a := do(t, newClient(t), preflightReq(c.url("us", 0)+"/t/acme/items", "https://a.example"))
	if a.status != 405 || a.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("OPTIONS without CORS: %d %v, want the API's 405", a.status, a.header)
	}
	if n := len(seenWhere(c, func(s Seen) bool { return s.Region == "eu" })); n != 1 {
		t.Errorf("the home saw %d requests, want the relayed OPTIONS", n)
	}
}
