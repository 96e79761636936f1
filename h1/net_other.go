//go:build !unix && !windows

package h1

// The portable poller's calls where there is neither a non-blocking socket to read beside Go's
// netpoller nor a way to tell what a readable socket holds (js, wasip1): reads and writes
// "now" are made under a deadline a moment away, and a readable socket is taken to have data,
// so that the client leaving is not seen while its request is served (a read meets it after).

// nonBlocking: no read can be tried without waiting (netSock.Read waits at once).
const nonBlocking = false

// netRaw: no raw calls here.
type netRaw struct{}

func (w *netSock) initRaw() {}

// look is the watcher's function for RawConn.Read: false first, so that Go's netpoller waits
// for the socket to be readable, then true.
func (w *netSock) look(uintptr) bool {
	if !w.waited {
		w.waited = true
		return false
	}
	w.seen = seenData
	return true
}

func (w *netSock) readNow(p []byte) (int, error)  { return w.readByDeadline(p) }
func (w *netSock) writeNow(p []byte) (int, error) { return w.writeByDeadline(p) }
func (w *netSock) readable() bool                 { return true }
