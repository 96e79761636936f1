//go:build !linux

package h1

// Elsewhere than Linux the portable poller is the only one (poll_net.go): a connection holds
// nothing of epoll's.

// defaultPoll is the poller a Server uses unless a test gives it another (Server.newPoll).
func defaultPoll(s *Server) (poller, sockets, error) { return newNetPoll(s) }

type fdConn struct{}

type fdSession struct{}

func newFDSession() fdSession { return fdSession{} }
func (*fdSession) releaseFD() {}
