package standin

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxWait caps Fenec-Wait.
const maxWait = 30 * time.Second

// serveWrite applies a write (POST /items, or PUT, PATCH, DELETE /items/<id>) once, here, in
// the tenant's home region, and answers it. With Fenec-Wait it first holds the write; a
// client that leaves meanwhile gets nothing applied. With Idempotency-Key, a repeat of the
// key (even a concurrent one) gets the first answer again, with Idempotent-Replayed: true,
// and nothing new is applied.
func (rt *Router) serveWrite(w http.ResponseWriter, req *http.Request, tenant, itemID string) {
	// Read the body first: the server sees the client leave only once the body is read.
	n, err := io.Copy(io.Discard, http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		writeBodyError(w, err)
		return
	}
	wait, err := parseWait(req.Header.Get(hdrWait))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_wait", err.Error())
		return
	}
	a := Apply{
		Tenant:    tenant,
		Region:    rt.region,
		Router:    rt.addr,
		Method:    req.Method,
		Key:       req.Header.Get(hdrIdemKey),
		RequestID: req.Header.Get(hdrReqID),
		ItemID:    itemID,
	}
	ctx := req.Context()
	if a.Key == "" {
		if ans := rt.applyAfter(ctx, wait, a, int(n)); ans != nil {
			writeStored(w, ans, false)
		}
		return
	}
	for {
		e, first := rt.c.keys.claim(tenant, a.Key)
		if first {
			ans := rt.applyAfter(ctx, wait, a, int(n))
			rt.c.keys.settle(tenant, a.Key, e, ans)
			if ans != nil {
				writeStored(w, ans, false)
			}
			return
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return
		}
		if e.ans != nil {
			writeStored(w, e.ans, true)
			return
		}
		// The first request of the key left before its write was applied: claim it again.
	}
}

// applyAfter holds the write for wait, then applies it. It returns nil, and applies
// nothing, if the client leaves first or the router is down.
func (rt *Router) applyAfter(ctx context.Context, wait time.Duration, a Apply, bodyLen int) *storedAnswer {
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		}
	}
	if ctx.Err() != nil || rt.isDown() {
		return nil
	}
	a.At = rt.c.clock.Now()
	return rt.c.store.apply(a, bodyLen, rt.c.hub.publish)
}

func writeStored(w http.ResponseWriter, ans *storedAnswer, replayed bool) {
	if replayed {
		w.Header().Set(hdrReplay, "true")
	}
	writeJSONBytes(w, ans.status, ans.body)
}

// parseWait reads Fenec-Wait: seconds, fractions allowed, capped at 30.
func parseWait(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("Fenec-Wait must be a number of seconds")
	}
	if f >= maxWait.Seconds() {
		return maxWait, nil
	}
	return time.Duration(f * float64(time.Second)), nil
}
