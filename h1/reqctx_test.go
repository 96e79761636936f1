package h1

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ran waits up to a second for ch to be closed or sent on.
func ran(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(time.Second):
		return false
	}
}

func TestReqCtxAfterFunc(t *testing.T) {
	ctx := &reqCtx{}
	if ctx.Err() != nil {
		t.Fatalf("Err before cancel = %v", ctx.Err())
	}
	first, second, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ctx.AfterFunc(func() { close(first) })
	ctx.AfterFunc(func() { close(second) })
	stop := ctx.AfterFunc(func() { close(stopped) })
	if !stop() {
		t.Fatal("stop before cancel = false, want true")
	}
	if stop() {
		t.Fatal("a second stop = true, want false")
	}
	done := ctx.Done()
	select {
	case <-done:
		t.Fatal("Done closed before cancel")
	default:
	}
	ctx.cancel()
	ctx.cancel() // idempotent
	if !ran(first) || !ran(second) {
		t.Fatal("a function registered before cancel did not run")
	}
	if !ran(done) {
		t.Fatal("Done not closed by cancel")
	}
	select {
	case <-stopped:
		t.Fatal("a stopped function ran")
	case <-time.After(50 * time.Millisecond):
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", ctx.Err())
	}
}

func TestReqCtxAfterCancel(t *testing.T) {
	ctx := &reqCtx{}
	ctx.cancel()
	if !ran(ctx.Done()) {
		t.Fatal("Done asked first after cancel is not closed")
	}
	late := make(chan struct{})
	stop := ctx.AfterFunc(func() { close(late) })
	if !ran(late) {
		t.Fatal("AfterFunc after cancel did not run at once")
	}
	if stop() {
		t.Fatal("stop after the function started = true, want false")
	}
}

// The standard library's helpers use the AfterFunc method: children are canceled with it.
func TestReqCtxWithStdlib(t *testing.T) {
	ctx := &reqCtx{}
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	hooked := make(chan struct{})
	context.AfterFunc(ctx, func() { close(hooked) })
	ctx.cancel()
	if !ran(child.Done()) {
		t.Fatal("a context.WithCancel child was not canceled")
	}
	if !ran(hooked) {
		t.Fatal("context.AfterFunc's function did not run")
	}
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("Deadline ok = true, want none")
	}
	if ctx.Value("anything") != nil {
		t.Fatal("Value != nil")
	}
}

var stopSink interface{ Stop() bool }

// OnCancel is AfterFunc for the proxy's router connection: its first hook costs no allocation,
// and its Stop is AfterFunc's stop.
func TestReqCtxOnCancel(t *testing.T) {
	ctxs := make([]reqCtx, 202)
	i := 0
	f := func() {}
	if n := testing.AllocsPerRun(200, func() {
		stopSink = ctxs[i].OnCancel(f) // kept, as the proxy keeps it: it must not need the heap
		stopSink.Stop()
		i++
	}); n != 0 {
		t.Fatalf("OnCancel and Stop: %v allocations, want 0", n)
	}
	ctx := &reqCtx{}
	hooked, stopped := make(chan struct{}), make(chan struct{})
	ctx.OnCancel(func() { close(hooked) })
	s := ctx.OnCancel(func() { close(stopped) })
	if !s.Stop() || s.Stop() {
		t.Fatal("Stop before cancel: want true, then false")
	}
	ctx.cancel()
	if !ran(hooked) {
		t.Fatal("OnCancel's function did not run at cancel")
	}
	select {
	case <-stopped:
		t.Fatal("a stopped function ran")
	case <-time.After(20 * time.Millisecond):
	}
}
