package standin

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func TestEventsThroughARelay(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.KeepAlive = 50 * time.Millisecond })
	client := newClient(t)
	resp, err := client.Get(c.url("us", 0) + "/t/acme/events?tick=20")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get(hdrShard) != "1" {
		t.Fatalf("stream answer %d %v", resp.StatusCode, resp.Header)
	}
	events := readEvents(resp.Body)

	var open map[string]string
	mustUnmarshal(t, []byte(nextEvent(t, events, "open", func(sseEvent) bool { return true }).data), &open)
	if open["tenant"] != "acme" || open["region"] != "eu" {
		t.Errorf("open = %v, want acme at eu", open)
	}
	var seqs []uint64
	for len(seqs) < 2 {
		var tick struct {
			Seq      uint64 `json:"seq"`
			UnixNano int64  `json:"unix_nano"`
		}
		mustUnmarshal(t, []byte(nextEvent(t, events, "tick", isEvent("tick")).data), &tick)
		if tick.UnixNano == 0 {
			t.Errorf("tick without unix_nano")
		}
		seqs = append(seqs, tick.Seq)
	}
	if seqs[0] != 1 || seqs[1] != 2 {
		t.Errorf("tick seqs %v, want 1 2", seqs)
	}
	nextEvent(t, events, "keep-alive", func(ev sseEvent) bool { return ev.comment == "keep-alive" })

	// A write at another router, and a write to another tenant, while the stream is open.
	do(t, newClient(t), req{method: "POST", url: c.url("eu", 1) + "/t/globex/items"})
	a := do(t, newClient(t), req{method: "POST", url: c.url("ap", 0) + "/t/acme/items", body: "xyz"})
	var item map[string]any
	mustUnmarshal(t, []byte(nextEvent(t, events, "item", isEvent("item")).data), &item)
	if item["id"] != a.json(t)["id"] || item["tenant"] != "acme" || item["body"] != 3.0 {
		t.Errorf("item event %v, want the write %s", item, a.body)
	}
}

func TestEventsBadTick(t *testing.T) {
	c := startCluster(t, nil)
	for _, q := range []string{"?tick=0", "?tick=x"} {
		if a := do(t, newClient(t), req{url: c.url("eu", 0) + "/t/acme/events" + q}); a.status != http.StatusBadRequest {
			t.Errorf("events%s: %d, want 400", q, a.status)
		}
	}
}

func TestHubDropsASlowSubscriber(t *testing.T) {
	var h hub
	h.init()
	s := h.subscribe("acme")
	defer h.unsubscribe(s)
	data, _ := json.Marshal(map[string]string{"id": "1"})
	for range subscriberBuffer + 1 {
		h.publish("acme", data)
	}
	select {
	case <-s.dropped:
	default:
		t.Error("a subscriber past its buffer was not dropped")
	}
}
