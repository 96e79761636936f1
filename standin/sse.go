package standin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// subscriberBuffer is how many item events a stream may fall behind before it is ended.
const subscriberBuffer = 1024

// serveEvents serves GET /t/<t>/events: server-sent events, flushed one by one, until the
// client leaves:
//
//	event: open  data: {"tenant":..,"region":..,"router":..}   at once
//	event: item  data: <the write's answer>                   per write applied to the tenant
//	event: tick  data: {"seq":N,"unix_nano":T}                every ?tick=<ms>, if asked
//	: keep-alive                                              every Config.KeepAlive
//
// A stream more than subscriberBuffer items behind is ended (a real router drops a reader
// that cannot keep up rather than hold the writers).
func (rt *Router) serveEvents(w http.ResponseWriter, req *http.Request, ex *exchange) {
	var tick time.Duration
	if s := req.URL.Query().Get("tick"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms <= 0 {
			writeError(w, http.StatusBadRequest, "bad_tick", "tick must be a positive number of milliseconds")
			return
		}
		tick = time.Duration(ms) * time.Millisecond
	}
	sub := rt.c.hub.subscribe(ex.tenant) // before "open": every item applied after it is sent
	defer rt.c.hub.unsubscribe(sub)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	open, _ := json.Marshal(map[string]string{"tenant": ex.tenant, "region": rt.region, "router": rt.addr})
	if writeEvent(w, "open", open) != nil {
		return
	}

	keepAlive := time.NewTicker(rt.c.keepAlive)
	defer keepAlive.Stop()
	var ticks <-chan time.Time
	if tick > 0 {
		t := time.NewTicker(tick)
		defer t.Stop()
		ticks = t.C
	}
	var seq uint64
	for {
		var err error
		select {
		case <-req.Context().Done():
			return
		case <-sub.dropped:
			return
		case data := <-sub.ch:
			err = writeEvent(w, "item", data)
		case now := <-ticks:
			seq++
			err = writeEvent(w, "tick", fmt.Appendf(nil, `{"seq":%d,"unix_nano":%d}`, seq, now.UnixNano()))
		case <-keepAlive.C:
			if _, err = fmt.Fprint(w, ": keep-alive\n\n"); err == nil {
				err = flush(w)
			}
		}
		if err != nil {
			return
		}
	}
}

// writeEvent writes one event (data on one line: it is JSON) and flushes it.
func writeEvent(w http.ResponseWriter, event string, data []byte) error {
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return flush(w)
}

// hub hands the writes applied to a tenant to the streams open on it.
type hub struct {
	mu   sync.Mutex // guards subs
	subs map[string]map[*subscriber]struct{}
}

type subscriber struct {
	tenant  string
	ch      chan []byte
	dropped chan struct{} // closed when the subscriber fell too far behind
	drop    sync.Once
}

func (h *hub) init() { h.subs = make(map[string]map[*subscriber]struct{}) }

func (h *hub) subscribe(tenant string) *subscriber {
	s := &subscriber{tenant: tenant, ch: make(chan []byte, subscriberBuffer), dropped: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[tenant] == nil {
		h.subs[tenant] = make(map[*subscriber]struct{})
	}
	h.subs[tenant][s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[s.tenant], s)
	if len(h.subs[s.tenant]) == 0 {
		delete(h.subs, s.tenant)
	}
}

// publish hands data to every stream of tenant without blocking: a full stream is dropped.
func (h *hub) publish(tenant string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[tenant] {
		select {
		case s.ch <- data:
		default:
			s.drop.Do(func() { close(s.dropped) })
		}
	}
}
