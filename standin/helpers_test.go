package standin

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test cluster: eu and us with two routers each, ap with one; acme is homed in eu,
// globex in us, initech in ap.
func startCluster(t *testing.T, mod func(*Config)) *Cluster {
	t.Helper()
	cfg := Config{
		Regions: []Region{
			{Name: "eu", Addrs: []string{"127.0.0.1:0", "127.0.0.1:0"}},
			{Name: "us", Addrs: []string{"127.0.0.1:0", "127.0.0.1:0"}},
			{Name: "ap", Addrs: []string{"127.0.0.1:0"}},
		},
		Tenants: map[string]string{"acme": "eu", "globex": "us", "initech": "ap"},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// url returns the URL of router i of region.
func (c *Cluster) url(region string, i int) string { return c.URLs(region)[i] }

// addr returns the address of router i of region.
func (c *Cluster) addrOf(region string, i int) string { return c.byName[region].routers[i].addr }

// newClient is a client whose requests fail after testRequestTimeout rather than hang.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: testRequestTimeout}
}

// testRequestTimeout bounds every request (and stream) of a test's client, and the raw
// connections' reads and writes: far above what any of them takes.
const testRequestTimeout = 20 * time.Second

type answer struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the answer's body into a map.
func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d body %q: %v", a.status, a.body, err)
	}
	return m
}

type req struct {
	method string
	url    string
	header map[string]string
	body   string
}

func do(t *testing.T, client *http.Client, r req) answer {
	t.Helper()
	a, err := doErr(context.Background(), client, r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.url, err)
	}
	return a
}

func doErr(ctx context.Context, client *http.Client, r req) (answer, error) {
	if r.method == "" {
		r.method = http.MethodGet
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, r.url, body)
	if err != nil {
		return answer{}, err
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// seenWhere returns the Seen records matching f.
func seenWhere(c *Cluster, f func(Seen) bool) []Seen {
	var out []Seen
	for _, s := range c.Seen() {
		if f(s) {
			out = append(out, s)
		}
	}
	return out
}

// testMark computes a Fenec-Client header the way the contract says, independently of
// marks.go.
func testMark(token, addr string, unix int64) string {
	secs := strconv.FormatInt(unix, 10)
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("fenec-client " + addr + " " + secs))
	return addr + " " + secs + " " + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

type sseEvent struct {
	event   string
	data    string
	comment string
}

// readEvents parses server-sent events from body until it ends; the channel is closed then.
func readEvents(body io.Reader) <-chan sseEvent {
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ch <- sseEvent{comment: strings.TrimSpace(line[1:])}
			case strings.HasPrefix(line, "event: "):
				ev.event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	return ch
}

// nextEvent returns the next event for which match holds, skipping the others.
func nextEvent(t *testing.T, ch <-chan sseEvent, what string, match func(sseEvent) bool) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended waiting for %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func isEvent(name string) func(sseEvent) bool {
	return func(ev sseEvent) bool { return ev.event == name }
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
}
