package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// pair is a loopback TCP connection: the wrapped side and the plain peer.
func pair(t *testing.T) (*Conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	d, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var peer net.Conn
	select {
	case peer = <-acc:
	case <-time.After(2 * time.Second):
		t.Fatal("no accept")
	}
	if peer == nil {
		t.Fatal("accept failed")
	}
	c, err := New(d.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	peer.SetDeadline(time.Now().Add(10 * time.Second))
	return c, peer.(*net.TCPConn)
}

func TestReadWrite(t *testing.T) {
	c, peer := pair(t)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	peer.Write([]byte("pong"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read = %d, %v", n, err)
	}
	peer.Close()
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// A write larger than the socket buffers waits for room and writes everything.
func TestWriteWaitsForRoom(t *testing.T) {
	c, peer := pair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	done := make(chan error, 1)
	go func() {
		n, err := c.Write(want)
		if err == nil && n != len(want) {
			err = errors.New("short write")
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the buffers fill first
	got, err := io.ReadAll(io.LimitReader(peer, int64(len(want))))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from the bytes written")
	}
}

func TestReadNow(t *testing.T) {
	c, peer := pair(t)
	buf := make([]byte, 8)
	if _, err := c.ReadNow(buf); err != ErrWouldBlock {
		t.Fatalf("ReadNow on an empty socket: %v, want ErrWouldBlock", err)
	}
	peer.Write([]byte("hi"))
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err := c.ReadNow(buf)
		if err == ErrWouldBlock && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil || string(buf[:n]) != "hi" {
			t.Fatalf("ReadNow = %q, %v", buf[:n], err)
		}
		break
	}
	peer.Close()
	for {
		_, err := c.ReadNow(buf)
		if err == ErrWouldBlock && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != io.EOF {
			t.Fatalf("ReadNow after the peer closed: %v, want io.EOF", err)
		}
		break
	}
}

// Errors are shaped as net.Conn's, so that callers' errors.Is and net.Error checks hold.
func TestErrorsAsNetConn(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		c, _ := pair(t)
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past the deadline: %v, want a net.Error timeout", err)
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("read past the deadline: %#v, want *net.OpError read", err)
		}
		c.SetWriteDeadline(time.Now().Add(-time.Second))
		if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write past the deadline: %v", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		c, _ := pair(t)
		c.Close()
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after Close: %v, want net.ErrClosed", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after Close: %v, want net.ErrClosed", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		c, peer := pair(t)
		peer.SetLinger(0)
		peer.Close() // no linger: a reset, not a FIN
		_, err := c.Read(make([]byte, 1))
		var oe *net.OpError
		if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("read after the peer's reset: %v, want a *net.OpError read ECONNRESET", err)
		}
	})
}

// answerAfter has peer read want (all of it) and then, after delay, write answer; the bytes it
// read, or its error, come on the channel.
func answerAfter(peer *net.TCPConn, want int, delay time.Duration, answer string) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, want)
		if _, err := io.ReadFull(peer, buf); err != nil {
			got <- []byte("peer: " + err.Error())
			return
		}
		time.Sleep(delay)
		peer.Write([]byte(answer))
		got <- buf
	}()
	return got
}

func TestWriteThenRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		delay time.Duration
	}{
		{"answer at once", 5, 0},
		{"answer later", 5, 30 * time.Millisecond},
		{"a write that fills the socket", 8 << 20, 0}, // the EAGAIN path: finished by Write
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := pair(t)
			req := bytes.Repeat([]byte("q"), tc.size)
			got := answerAfter(peer, len(req), tc.delay, "pong")
			buf := make([]byte, 16)
			n, err := c.WriteThenRead(req, buf)
			if err != nil || string(buf[:n]) != "pong" {
				t.Fatalf("WriteThenRead = %q, %v; want pong", buf[:n], err)
			}
			select {
			case b := <-got:
				if !bytes.Equal(b, req) {
					t.Fatalf("the peer read %d bytes (%.40q), want the %d written", len(b), b, len(req))
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the peer read nothing")
			}
		})
	}
}

// The point of WriteThenRead: the answer is read by one read system call, where Write and then
// Read make two (the first meets an empty socket, the peer not having answered yet).
func TestWriteThenReadSkipsTheEmptyRead(t *testing.T) {
	reads := func(f func(c *Conn, buf []byte) (int, error)) int {
		c, peer := pair(t)
		got := answerAfter(peer, 4, 20*time.Millisecond, "pong")
		buf := make([]byte, 16)
		n, err := f(c, buf)
		if err != nil || string(buf[:n]) != "pong" {
			t.Fatalf("read %q, %v; want pong", buf[:n], err)
		}
		<-got
		return c.Reads()
	}
	split := reads(func(c *Conn, buf []byte) (int, error) {
		if _, err := c.Write([]byte("ping")); err != nil {
			return 0, err
		}
		return c.Read(buf)
	})
	joined := reads(func(c *Conn, buf []byte) (int, error) { return c.WriteThenRead([]byte("ping"), buf) })
	if split != 2 || joined != 1 {
		t.Fatalf("read system calls: Write and Read %d (want 2: one meets the empty socket), WriteThenRead %d (want 1)", split, joined)
	}
}

func TestWriteThenReadErrors(t *testing.T) {
	isOp := func(err error, op string) bool {
		var oe *net.OpError
		return errors.As(err, &oe) && oe.Op == op
	}
	t.Run("closed before", func(t *testing.T) {
		c, _ := pair(t)
		c.Close()
		_, err := c.WriteThenRead([]byte("x"), make([]byte, 1))
		if !errors.Is(err, net.ErrClosed) || !isOp(err, "write") {
			t.Fatalf("after Close: %v, want a write error wrapping net.ErrClosed", err)
		}
	})
	t.Run("reset before", func(t *testing.T) {
		c, peer := pair(t)
		peer.SetLinger(0)
		peer.Close() // a reset
		time.Sleep(20 * time.Millisecond)
		_, err := c.WriteThenRead([]byte("x"), make([]byte, 1))
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) || !isOp(err, "write") {
			t.Fatalf("after the peer's reset: %v, want a write error (ECONNRESET or EPIPE)", err)
		}
	})
	t.Run("deadline while waiting", func(t *testing.T) {
		c, peer := pair(t)
		c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		_, err := c.WriteThenRead([]byte("x"), make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) || !isOp(err, "read") {
			t.Fatalf("no answer by the deadline: %v, want a read timeout", err)
		}
		if b, err := io.ReadAll(io.LimitReader(peer, 1)); err != nil || string(b) != "x" {
			t.Fatalf("the peer read %q, %v; want the x written before the wait", b, err)
		}
	})
	t.Run("close while waiting", func(t *testing.T) {
		c, _ := pair(t)
		time.AfterFunc(30*time.Millisecond, func() { c.Close() })
		_, err := c.WriteThenRead([]byte("x"), make([]byte, 1))
		if !errors.Is(err, net.ErrClosed) || !isOp(err, "read") {
			t.Fatalf("Close while waiting: %v, want a read error wrapping net.ErrClosed", err)
		}
	})
	t.Run("end", func(t *testing.T) {
		c, peer := pair(t)
		go func() { io.ReadFull(peer, make([]byte, 1)); peer.CloseWrite() }()
		n, err := c.WriteThenRead([]byte("x"), make([]byte, 1))
		if n != 0 || err != io.EOF {
			t.Fatalf("the peer's end: %d, %v; want 0, io.EOF", n, err)
		}
	})
}
