package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// childrenOf returns the pids whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so count from its closing parenthesis.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// TestWorkersEndToEnd: the binary with --workers 2 serves from two worker processes; one
// killed is started again from the master's own binary, even after the file was replaced
// (a package upgrade: a new binary could not speak to the old master); SIGTERM drains the
// master and its workers, and none is left.
func TestWorkersEndToEnd(t *testing.T) {
	_, routers := twoRegions(t)
	bin := filepath.Join(t.TempDir(), "fenec-entry")
	b, err := os.ReadFile(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	e := startEntryBin(t, bin, []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--routers", routers, "--pop", "w", "--node", "w", "--workers", "2", "--drain", "100ms",
		"--gossip-bind", "127.0.0.1:0", "--rpc-addr", "127.0.0.1:0"}, cleanEnv())
	client, admin := e.started(t)
	ask := func() int {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + client + "/t/acme/items/1")
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := ask(); code != 404 { // the stand-in's answer for an unknown item
		t.Fatalf("first request: %d", code)
	}
	workers := childrenOf(e.cmd.Process.Pid)
	if len(workers) != 2 {
		t.Fatalf("worker processes %v, want 2", workers)
	}

	// Replace the file, as a package upgrade does (a new inode at the path).
	os.Remove(bin)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(workers[0], syscall.SIGKILL)
	testutil.Eventually(t, 10*time.Second, "a new worker serving, all ready", func() bool {
		now := childrenOf(e.cmd.Process.Pid)
		if len(now) != 2 || now[0] == workers[0] && now[1] == workers[1] {
			return false
		}
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for range 16 {
		if code := ask(); code != 404 {
			t.Fatalf("after the restart: %d", code)
		}
	}

	all := childrenOf(e.cmd.Process.Pid)
	e.stop(t)
	for _, pid := range all {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("worker %d still runs after the master's drain", pid)
		}
	}
}
