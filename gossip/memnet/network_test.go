package memnet

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func recvPacket(t *testing.T, tr *Transport, timeout time.Duration) *memberlist.Packet {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p
	case <-time.After(timeout):
		t.Fatalf("%s: no packet within %v", tr.Name(), timeout)
		return nil
	}
}

func noPacket(t *testing.T, tr *Transport, within time.Duration) {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		t.Fatalf("%s: unexpected packet %q", tr.Name(), p.Buf)
	case <-time.After(within):
	}
}

func TestAddresses(t *testing.T) {
	nw := New(1)
	a, b := nw.NewTransport("a"), nw.NewTransport("b")
	defer a.Shutdown()
	defer b.Shutdown()
	if a.Addr() == b.Addr() {
		t.Fatalf("a and b share address %s", a.Addr())
	}
	ip, port, err := a.FinalAdvertiseAddr("0.0.0.0", 1234)
	if err != nil || net.JoinHostPort(ip.String(), "7946") != a.Addr() || port != Port {
		t.Fatalf("FinalAdvertiseAddr = %v, %d, %v; want %s", ip, port, err, a.Addr())
	}
	if !ip.IsLoopback() {
		t.Errorf("address %v is not loopback", ip)
	}
	// A restarted node keeps its address.
	_ = a.Shutdown()
	a2 := nw.NewTransport("a")
	defer a2.Shutdown()
	if a2.Addr() != a.Addr() {
		t.Errorf("restarted a at %s, want %s", a2.Addr(), a.Addr())
	}
}

func TestPacketDelivery(t *testing.T) {
	nw := New(1)
	a, b := nw.NewTransport("a"), nw.NewTransport("b")
	defer a.Shutdown()
	defer b.Shutdown()

	buf := []byte("hello")
	if _, err := a.WriteTo(buf, b.Addr()); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'j' // the network must have copied it
	p := recvPacket(t, b, time.Second)
	if string(p.Buf) != "hello" || p.From.String() != a.Addr() {
		t.Fatalf("got %q from %v, want hello from %s", p.Buf, p.From, a.Addr())
	}
	// By name, with a wrong address: the name wins.
	if _, err := b.WriteToAddress([]byte("x"), memberlist.Address{Name: "a", Addr: "1.2.3.4:5"}); err != nil {
		t.Fatal(err)
	}
	recvPacket(t, a, time.Second)
	if _, err := a.WriteTo([]byte("x"), "127.9.9.9:1"); !errors.Is(err, ErrNoRoute) {
		t.Errorf("write to unknown address: err = %v, want ErrNoRoute", err)
	}
}

func TestLatency(t *testing.T) {
	nw := New(1)
	nw.SetLatency(50*time.Millisecond, 80*time.Millisecond)
	a, b := nw.NewTransport("a"), nw.NewTransport("b")
	defer a.Shutdown()
	defer b.Shutdown()
	const n = 20
	start := time.Now() // before every send: no packet may arrive 50ms after it
	for range n {
		if _, err := a.WriteTo([]byte("x"), b.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		p := recvPacket(t, b, time.Second)
		if d := p.Timestamp.Sub(start); d < 50*time.Millisecond {
			t.Errorf("packet delivered after %v, want >= 50ms", d)
		}
	}
}

func TestLoss(t *testing.T) {
	nw := New(1)
	nw.SetLoss(0.3)
	a, b := nw.NewTransport("a"), nw.NewTransport("b")
	defer a.Shutdown()
	defer b.Shutdown()
	const n = 1000
	for range n {
		_, _ = a.WriteTo([]byte("x"), b.Addr())
	}
	st := nw.Stats()
	if st.Sent != n || st.DroppedLoss+st.Delivered != n {
		t.Fatalf("stats %+v: want sent = lost + delivered = %d", st, n)
	}
	if st.DroppedLoss < 240 || st.DroppedLoss > 360 {
		t.Errorf("lost %d of %d at p=0.3", st.DroppedLoss, n)
	}
}

// A full inbox drops, it does not block the sender: the old MockTransport
// blocked here, which deadlocked nodes pinging each other.
func TestFullInboxDropsWithoutBlocking(t *testing.T) {
	for _, latency := range []time.Duration{0, time.Millisecond} {
		nw := New(1)
		nw.SetLatency(latency, latency)
		a, b := nw.NewTransport("a"), nw.NewTransport("b")
		const n = 3 * QueueLen
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range n {
				_, _ = a.WriteTo([]byte("x"), b.Addr())
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("latency %v: sender blocked on a full inbox", latency)
		}
		testutil.Eventually(t, 5*time.Second, "all packets accounted for", func() bool {
			st := nw.Stats()
			return st.Delivered+st.DroppedQueueFull == n
		})
		if st := nw.Stats(); st.Delivered != QueueLen {
			t.Errorf("latency %v: delivered %d, want %d (the inbox size)", latency, st.Delivered, QueueLen)
		}
		_ = a.Shutdown()
		_ = b.Shutdown()
	}
}

func TestPartitionAndKill(t *testing.T) {
	tests := []struct {
		name    string
		cut     func(nw *Network)
		reaches map[[2]string]bool // from, to -> delivered
	}{
		{"partition listed groups", func(nw *Network) { nw.Partition([]string{"a"}, []string{"b", "c"}) },
			map[[2]string]bool{{"a", "b"}: false, {"b", "a"}: false, {"b", "c"}: true, {"c", "a"}: false}},
		{"unlisted nodes form one group", func(nw *Network) { nw.Partition([]string{"a"}) },
			map[[2]string]bool{{"a", "b"}: false, {"b", "c"}: true, {"c", "a"}: false}},
		{"heal", func(nw *Network) { nw.Partition([]string{"a"}); nw.Heal() },
			map[[2]string]bool{{"a", "b"}: true, {"b", "a"}: true, {"b", "c"}: true}},
		{"kill", func(nw *Network) { nw.Kill("a") },
			map[[2]string]bool{{"a", "b"}: false, {"b", "a"}: false, {"b", "c"}: true}},
		{"revive", func(nw *Network) { nw.Kill("a"); nw.Revive("a") },
			map[[2]string]bool{{"a", "b"}: true, {"b", "a"}: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw := New(1)
			trs := map[string]*Transport{}
			for _, name := range []string{"a", "b", "c"} {
				trs[name] = nw.NewTransport(name)
				defer trs[name].Shutdown()
				defer acceptAll(trs[name], func(c net.Conn) { _ = c.Close() })()
			}
			tt.cut(nw)
			for link, want := range tt.reaches {
				from, to := trs[link[0]], trs[link[1]]
				if _, err := from.WriteTo([]byte("x"), to.Addr()); err != nil {
					t.Fatal(err)
				}
				if want {
					recvPacket(t, to, time.Second)
				} else {
					noPacket(t, to, 20*time.Millisecond)
				}
				_, err := from.DialTimeout(to.Addr(), 50*time.Millisecond)
				if want {
					if err != nil {
						t.Errorf("dial %s->%s: %v", link[0], link[1], err)
					}
				} else if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("dial %s->%s: err = %v, want a timeout", link[0], link[1], err)
				}
			}
		})
	}
}

// acceptAll hands every stream of tr to handle until stop is called, as
// memberlist's stream listener does. stop is idempotent.
func acceptAll(tr *Transport, handle func(net.Conn)) (stop func()) {
	quit := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case c := <-tr.StreamCh():
				wg.Go(func() { handle(c) })
			case <-quit:
				return
			}
		}
	})
	return func() { once.Do(func() { close(quit) }); wg.Wait() }
}

func TestStreams(t *testing.T) {
	nw := New(1)
	a, b := nw.NewTransport("a"), nw.NewTransport("b")
	defer a.Shutdown()
	stop := acceptAll(b, func(c net.Conn) {
		defer c.Close()
		_, _ = io.Copy(c, c) // echo until the dialer closes
	})
	defer stop()

	c, err := a.DialAddressTimeout(memberlist.Address{Addr: b.Addr(), Name: "b"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.RemoteAddr().String() != b.Addr() || c.LocalAddr().String() != a.Addr() {
		t.Errorf("conn %v -> %v, want %s -> %s", c.LocalAddr(), c.RemoteAddr(), a.Addr(), b.Addr())
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second)) // a lost echo fails, not hangs
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo = %q, %v", got, err)
	}

	// A partition closes established streams across it.
	nw.Partition([]string{"a"})
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(got); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read across a new partition: err = %v, want the stream closed", err)
	}
	nw.Heal()

	// Shutdown: dials to b are refused at once; Shutdown is idempotent.
	stop()
	_ = b.Shutdown()
	_ = b.Shutdown()
	start := time.Now()
	if _, err := a.DialTimeout(b.Addr(), 5*time.Second); !errors.Is(err, ErrRefused) {
		t.Errorf("dial to a shut-down node: err = %v, want ErrRefused", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused dial took %v", d)
	}
	if _, err := a.WriteTo([]byte("x"), b.Addr()); err != nil {
		t.Errorf("write to a shut-down node: %v, want silently dropped", err)
	}
	if st := nw.Stats(); st.DroppedDown != 1 {
		t.Errorf("DroppedDown = %d, want 1", st.DroppedDown)
	}
}

// A dial that nobody accepts (memberlist not reading its StreamCh) honours
// its timeout instead of blocking, which the old MockTransport did not.
func TestDialTimeoutWhenNotAccepted(t *testing.T) {
	nw := New(1)
	a, b := nw.NewTransport("a"), nw.NewTransport("b")
	defer a.Shutdown()
	defer b.Shutdown()
	start := time.Now()
	_, err := a.DialTimeout(b.Addr(), 50*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("err %v is not a net.Error with Timeout()", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("dial took %v", d)
	}
}

// BenchmarkWriteTo measures the sender's cost of one packet, with the
// receiver draining its inbox as memberlist does.
func BenchmarkWriteTo(b *testing.B) {
	for _, latency := range []time.Duration{0, time.Millisecond} {
		b.Run("latency="+latency.String(), func(b *testing.B) {
			nw := New(1)
			nw.SetLatency(latency, latency)
			src, dst := nw.NewTransport("a"), nw.NewTransport("b")
			defer src.Shutdown()
			defer dst.Shutdown()
			quit := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-dst.PacketCh():
					case <-quit:
						return
					}
				}
			})
			defer func() { close(quit); wg.Wait() }()
			buf := make([]byte, 1400)
			b.ReportAllocs()
			for b.Loop() {
				_, _ = src.WriteTo(buf, dst.Addr())
			}
		})
	}
}
