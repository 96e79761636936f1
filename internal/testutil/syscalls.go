package testutil

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// ReadsDuring runs f on the calling goroutine, locked to its thread, and returns how many read
// system calls that thread made meanwhile (the kernel's syscr of /proc/thread-self/io, less
// what reading the count itself costs): for a test of a path that must not read more than it
// needs. f's goroutine parks and resumes on the same thread; reads by other goroutines (a
// peer's) are not counted. It fails t if the kernel does not keep the count.
func ReadsDuring(t testing.TB, f func()) int64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := threadReads(t)
	b := threadReads(t)
	f()
	c := threadReads(t)
	return (c - b) - (b - a)
}

func threadReads(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatalf("counting a thread's reads needs /proc/thread-self/io: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("/proc/thread-self/io: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("/proc/thread-self/io has no syscr: %q", b)
	return 0
}
