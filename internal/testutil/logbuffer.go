package testutil

import (
	"bytes"
	"sync"
)

// LogBuffer collects what a test's code logs (a zerolog.Logger's or a child process's
// output) for the test to read. Unlike t.Log it may be written after the test has ended.
// The zero value is an empty buffer ready for use. It is safe for concurrent use: any number
// of goroutines may write while others read.
type LogBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
