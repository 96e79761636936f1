//go:build !unix

package proxy

// idleAlive cannot look at a socket here (no non-blocking peek): a pooled connection is taken
// as alive, as one that is no syscall.Conn is, and a stale one fails as a stale keep-alive
// connection does (a retryable request is sent once more on a fresh one).
func idleAlive(uintptr) bool { return true }
