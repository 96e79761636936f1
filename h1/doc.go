// Package h1 is the entry's HTTP/1.x server, plain and over TLS (--http1-server lean): a
// connection waiting for its next request holds no goroutine and no buffer of its own,
// parked in an epoll instance, and is served by kept workers when the client sends (Server).
// It reads every request through the door (package door) and hands what is not HTTP/1.x (h2
// negotiated over TLS, h2c, connections that are not TCP) to net/http.
//
// It is built on Linux only: its poller is epoll, its sockets raw file descriptors. Elsewhere
// the entry serves HTTP/1.x with net/http (node, lean_other.go). It knows nothing of routers,
// tenants or gossip: it serves an http.Handler.
package h1
