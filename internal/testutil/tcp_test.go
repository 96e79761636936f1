package testutil

import (
	"io"
	"net"
	"testing"
	"time"
)

func TestServeTCPAndTCPPair(t *testing.T) {
	addr := ServeTCP(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.Copy(c, c) // echo until the client closes
	})
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}

	a, b := TCPPair(t)
	b.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("pair: %q, %v", buf, err)
	}
	if a.LocalAddr().String() != b.RemoteAddr().String() {
		t.Errorf("the pair's ends are %v and %v, not one connection", a.LocalAddr(), b.RemoteAddr())
	}
}
