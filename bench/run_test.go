//go:build linux

package main

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// stop ends a process that ignores SIGTERM (SIGKILL 5 s in) and one that obeys it at once,
// and a stopped process is not alive.
func TestStop(t *testing.T) {
	r := &run{name: "test", tmp: t.TempDir(), port: 19700}
	stubborn, err := r.start("stubborn", spec{}, "sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`)
	if err != nil {
		t.Fatal(err)
	}
	meek, err := r.start("meek", spec{}, "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the trap set
	t0 := time.Now()
	r.close()
	if d := time.Since(t0); d > 8*time.Second || stubborn.alive() || meek.alive() {
		t.Fatalf("after %v: stubborn alive %v, meek alive %v", d, stubborn.alive(), meek.alive())
	}
	if d := time.Since(t0); d < 4*time.Second {
		t.Errorf("a process that ignores SIGTERM was killed after %v: want the 5 s of grace", d)
	}
}

// freePort passes over a port with a listener.
func TestFreePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	r := &run{port: busy}
	p, err := r.freePort()
	if err != nil || p == busy {
		t.Fatalf("freePort from %d = %d, %v", busy, p, err)
	}
	if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err != nil {
		t.Errorf("port %d is not free: %v", p, err)
	} else {
		l.Close()
	}
}
