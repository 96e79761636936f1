// Package h1 is the entry's HTTP/1.x server, plain and over TLS (Server): a connection waiting
// for its next request holds no buffer of its own and is served by kept workers when the
// client sends. It reads every request through the door (package door) and hands what is not
// HTTP/1.x (h2 negotiated over TLS, h2c, connections that are not TCP) to net/http.
//
// It is built on every system. Its poller is behind a small interface (poller.go): on Linux
// epoll over bare file descriptors, where a waiting connection holds no goroutine either;
// elsewhere Go's netpoller over net.Conns, where it holds one (poll_net.go). It knows nothing of
// routers, tenants or gossip: it serves an http.Handler.
package h1
