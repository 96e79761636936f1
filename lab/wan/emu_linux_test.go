//go:build linux

package wan

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needRoot skips a test that needs root, or fails it when CI is set (CI runs as root, so a
// skip there would hide that the emulator was never tested).
func needRoot(t testing.TB) {
	t.Helper()
	missing := Missing()
	if missing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the WAN emulator's test needs %s, and CI is set: run it as root on Linux", missing)
	}
	t.Skipf("needs %s; run as root (make lab)", missing)
}

// start starts an emulator that t's cleanup closes, whatever the test's outcome.
func start(t testing.TB, ctx context.Context, cfg Config) *Emulator {
	t.Helper()
	e, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, s := range e.Sites() {
			if _, err := os.Stat("/run/netns/" + e.Namespace(s)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("namespace %s left after Close (%v)", e.Namespace(s), err)
			}
		}
	})
	return e
}

// listenUDP opens a UDP socket in a site, on its address and port.
func listenUDP(t testing.TB, e *Emulator, site string, port uint16) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := e.Do(site, func() error {
		var err error
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.Addr(site), port)))
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", site, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo answers every datagram c receives with itself until c is closed.
func echo(c *net.UDPConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		_, _ = c.WriteToUDPAddrPort(buf[:n], from)
	}
}

type probeResult struct {
	rtts []time.Duration // of the probes answered
	sent int
}

// probe sends n numbered datagrams from c to an echo at to, one each interval, and collects
// the round trips of the answers that come back within wait after the last send.
func probe(ctx context.Context, c *net.UDPConn, to netip.AddrPort, n int, interval, wait time.Duration) (probeResult, error) {
	sentAt := make([]time.Time, n)
	var mu sync.Mutex
	var rtts []time.Duration
	seen := make([]bool, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			m, err := c.Read(buf)
			now := time.Now()
			if err != nil {
				return
			}
			if m < 4 {
				continue
			}
			seq := int(binary.BigEndian.Uint32(buf))
			mu.Lock()
			if seq < n && !seen[seq] && !sentAt[seq].IsZero() {
				seen[seq] = true
				rtts = append(rtts, now.Sub(sentAt[seq]))
			}
			mu.Unlock()
		}
	}()
	msg := make([]byte, 32)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	res := probeResult{}
	for i := range n {
		binary.BigEndian.PutUint32(msg, uint32(i))
		mu.Lock()
		sentAt[i] = time.Now()
		mu.Unlock()
		if _, err := c.WriteToUDPAddrPort(msg, to); err != nil {
			return res, err
		}
		res.sent++
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	<-done
	mu.Lock()
	res.rtts = rtts
	mu.Unlock()
	return res, nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestWANDelays runs a UDP echo across pairs of sites of the matrix and checks that each
// pair's median round trip is the configured one (within 10 % plus 2 ms), that none is faster,
// and that the share of probes lost matches the configured loss.
func TestWANDelays(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// fra-eu is the shortest pair of the matrix; it also gets a high loss, so that the loss
	// can be checked on a few hundred probes. Every other link is the matrix's.
	const lossyLoss = 0.10
	lossy := func(a, b string) bool { return (a == "fra" && b == "eu") || (a == "eu" && b == "fra") }
	cfg := Config{
		Sites: []string{"eu", "us", "ap", "fra"},
		Seed:  1,
		Link: func(a, b string) Link {
			l := MatrixLink(a, b)
			if lossy(a, b) {
				l.Loss = lossyLoss
			}
			return l
		},
	}
	e := start(t, ctx, cfg)

	const port = 7
	for _, s := range cfg.Sites {
		go echo(listenUDP(t, e, s, port))
	}

	pairs := [][2]string{{"fra", "eu"}, {"eu", "us"}, {"us", "ap"}, {"eu", "ap"}, {"fra", "ap"}}
	const n, interval = 300, 4 * time.Millisecond
	results := make([]probeResult, len(pairs))
	errs := make([]error, len(pairs))
	var wg sync.WaitGroup
	for i, p := range pairs {
		c := listenUDP(t, e, p[0], 0)
		rtt, _ := RTT(p[0], p[1])
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = probe(ctx, c, netip.AddrPortFrom(e.Addr(p[1]), port), n, interval, rtt+time.Second)
		}()
	}
	wg.Wait()

	st := e.Stats()
	for i, p := range pairs {
		a, b := p[0], p[1]
		if errs[i] != nil {
			t.Errorf("%s->%s: %v", a, b, errs[i])
			continue
		}
		r := results[i]
		want := e.Link(a, b).Delay + e.Link(b, a).Delay
		if len(r.rtts) == 0 {
			t.Errorf("%s->%s: no answer to %d probes", a, b, r.sent)
			continue
		}
		med, lo := median(r.rtts), slices.Min(r.rtts)
		tol := want/10 + 2*time.Millisecond
		lost := r.sent - len(r.rtts)
		// A probe is lost if either way drops it.
		pLoss := 1 - (1-e.Link(a, b).Loss)*(1-e.Link(b, a).Loss)
		mean := float64(r.sent) * pLoss
		sd := math.Sqrt(float64(r.sent) * pLoss * (1 - pLoss))
		emuLost := st.Pair(a, b).Lost + st.Pair(b, a).Lost
		t.Logf("%s->%s: configured %v, median %v (min %v, max %v); lost %d of %d (expected %.1f, emulator dropped %d)",
			a, b, want, med.Round(10*time.Microsecond), lo.Round(10*time.Microsecond),
			slices.Max(r.rtts).Round(10*time.Microsecond), lost, r.sent, mean, emuLost)
		if med < want-tol || med > want+tol {
			t.Errorf("%s->%s: median round trip %v, want %v ± %v", a, b, med, want, tol)
		}
		if lo < want {
			t.Errorf("%s->%s: a round trip of %v, faster than the configured %v", a, b, lo, want)
		}
		// Within 4 standard deviations (plus one packet): a real fault is far outside, and
		// the seeded loss makes the count the same from run to run anyway.
		if math.Abs(float64(lost)-mean) > 4*sd+1 {
			t.Errorf("%s->%s: lost %d of %d, want about %.1f (sd %.1f)", a, b, lost, r.sent, mean, sd)
		}
		// Every probe the client missed was dropped by the emulator, and no more.
		if uint64(lost) != emuLost {
			t.Errorf("%s->%s: client lost %d probes, emulator dropped %d", a, b, lost, emuLost)
		}
		if o := st.Pair(a, b).Overflow + st.Pair(b, a).Overflow; o != 0 {
			t.Errorf("%s->%s: %d packets over the queue bound", a, b, o)
		}
	}
	t.Logf("unroutable packets: %d", st.Unroutable)
}

// RemoveStale removes the namespace a dead process left, and not one of a live process.
func TestRemoveStale(t *testing.T) {
	needRoot(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := "fwan-" + strconv.Itoa(dead.Process.Pid) + "-1-x"
	live := "fwan-" + strconv.Itoa(os.Getpid()) + "-999-x"
	for _, ns := range []string{stale, live} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	removed, err := RemoveStale()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, stale) || slices.Contains(removed, live) {
		t.Fatalf("removed %v; want %s removed and %s kept", removed, stale, live)
	}
	if _, err := os.Stat("/run/netns/" + live); err != nil {
		t.Fatalf("live namespace: %v", err)
	}
}

// BenchmarkForward measures this process's CPU time per 64-byte UDP datagram carried from
// one site to another with no delay ("emulated": the emulator's read, copy, queue and write,
// plus the sockets of both ends, which are this process's too), and the same datagrams between
// two sockets on loopback ("loopback": the ends alone). The difference is the emulator's cost.
func BenchmarkForward(b *testing.B) {
	needRoot(b)
	b.Run("emulated", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		e := start(b, ctx, Config{Sites: []string{"a", "b"}, Link: func(string, string) Link { return Link{} }})
		rx := listenUDP(b, e, "b", 9)
		tx := listenUDP(b, e, "a", 0)
		pump(ctx, b, tx, rx, netip.AddrPortFrom(e.Addr("b"), 9))
		if d := e.Stats().Pair("a", "b").Delivered; d < uint64(b.N) {
			b.Errorf("delivered %d of %d", d, b.N)
		}
	})
	b.Run("loopback", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Fatal(err)
		}
		defer rx.Close()
		tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Close()
		pump(ctx, b, tx, rx, rx.LocalAddr().(*net.UDPAddr).AddrPort())
	})
}

// pump sends b.N datagrams from tx to rx (which must receive at to), at most a window in
// flight, and reports the process's CPU time per datagram.
func pump(ctx context.Context, b *testing.B, tx, rx *net.UDPConn, to netip.AddrPort) {
	// At most window datagrams in flight, so that no socket buffer or queue overflows.
	const window = 128
	credit := make(chan struct{}, window)
	for range window {
		credit <- struct{}{}
	}
	var got atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := rx.Read(buf); err != nil {
				return
			}
			got.Add(1)
			credit <- struct{}{}
		}
	}()
	defer rx.SetReadDeadline(time.Now())
	msg := make([]byte, 64)
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		select {
		case <-credit:
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
		if _, err := tx.WriteToUDPAddrPort(msg, to); err != nil {
			b.Fatal(err)
		}
	}
	for got.Load() < int64(b.N) && ctx.Err() == nil {
		time.Sleep(100 * time.Microsecond)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/pkt")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TCP crosses the WAN too: the handshake takes one round trip, and 256 KiB echoed come back
// whole (segments of the TUN's MTU, in order).
func TestWANTCP(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{Sites: []string{"eu", "us"}, Link: func(a, b string) Link { return Link{Delay: MatrixLink(a, b).Delay} }}
	e := start(t, ctx, cfg)
	var ln net.Listener
	if err := e.Do("us", func() error {
		var err error
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(e.Addr("us"), 8080).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()

	var c net.Conn
	var took time.Duration
	if err := e.Do("eu", func() error {
		var d net.Dialer
		t0 := time.Now()
		var err error
		c, err = d.DialContext(ctx, "tcp4", netip.AddrPortFrom(e.Addr("us"), 8080).String())
		took = time.Since(t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := e.Link("eu", "us").Delay + e.Link("us", "eu").Delay
	t.Logf("connect eu->us: %v (round trip %v)", took.Round(10*time.Microsecond), want)
	if took < want || took > want+want/10+2*time.Millisecond {
		t.Errorf("connect took %v, want one round trip, %v", took, want)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	out := make([]byte, 256<<10)
	for i := range out {
		out[i] = byte(i * 7)
	}
	go func() { _, _ = c.Write(out) }()
	back := make([]byte, len(out))
	t0 := time.Now()
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, back) {
		t.Fatal("echoed bytes differ")
	}
	t.Logf("256 KiB echoed in %v", time.Since(t0).Round(time.Millisecond))
}

// Each site has its address on the TUN, loopback up, and a route to the lab's range; the
// machine's own namespace gets nothing.
func TestSiteSetup(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := start(t, ctx, Config{Sites: []string{"eu", "us"}})
	for _, s := range e.Sites() {
		out, err := e.Command(ctx, s, "ip", "-4", "-o", "addr", "show").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", s, err, out)
		}
		if want := tunName + "    inet " + e.Addr(s).String() + "/16"; !strings.Contains(string(out), want) {
			t.Errorf("%s: no %q in\n%s", s, want, out)
		}
		if !strings.Contains(string(out), "lo    inet 127.0.0.1/8") {
			t.Errorf("%s: loopback not up:\n%s", s, out)
		}
		out, err = e.Command(ctx, s, "ip", "-4", "route", "get", "198.18.0.200").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "dev "+tunName) {
			t.Errorf("%s: route to the lab's range: %v: %s", s, err, out)
		}
	}
	if _, err := net.InterfaceByName(tunName); err == nil {
		t.Errorf("a %s device in the machine's own namespace", tunName)
	}
}

// A Start that fails half-way removes the namespaces it had made.
func TestStartFailureCleansUp(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The next emulator's second site's namespace, made beforehand, so that Start fails there.
	prefix := fmt.Sprintf("fwan-%d-%d-", os.Getpid(), emulators.Load()+1)
	taken := prefix + "us"
	if out, err := exec.Command("ip", "netns", "add", taken).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", taken, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", taken).Run() })
	e, err := Start(ctx, Config{Sites: []string{"eu", "us"}})
	if err == nil {
		e.Close()
		t.Fatal("Start succeeded over a namespace that exists")
	}
	t.Logf("Start: %v", err)
	if _, err := os.Stat("/run/netns/" + prefix + "eu"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace %seu left after a failed Start (%v)", prefix, err)
	}
	if _, err := os.Stat("/run/netns/" + taken); err != nil {
		t.Errorf("the namespace Start did not make was removed: %v", err)
	}
}

// TestSetLoss cuts one direction of a link while the emulator runs (loss 1), checks that
// nothing crosses it that way while the other pairs carry on, then mends it.
func TestSetLoss(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noLoss := func(from, to string) Link { return Link{Delay: MatrixLink(from, to).Delay} }
	e := start(t, ctx, Config{Sites: []string{"eu", "us", "fra"}, Link: noLoss})
	const port = 9000
	for _, s := range []string{"eu", "us"} {
		go echo(listenUDP(t, e, s, port))
	}
	run := func(from, to string) probeResult {
		t.Helper()
		c := listenUDP(t, e, from, 0)
		res, err := probe(ctx, c, netip.AddrPortFrom(e.Addr(to), port), 20, 2*time.Millisecond, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if err := e.SetLoss("fra", "eu", 1); err != nil {
		t.Fatal(err)
	}
	if l := e.Link("fra", "eu"); l.Loss != 1 || l.Delay != MatrixLink("fra", "eu").Delay {
		t.Errorf("Link(fra, eu) after SetLoss = %+v", l)
	}
	if got := run("fra", "eu"); len(got.rtts) != 0 {
		t.Errorf("fra->eu cut: %d of %d probes answered, want none", len(got.rtts), got.sent)
	}
	if got := run("fra", "us"); len(got.rtts) != got.sent {
		t.Errorf("fra->us, not cut: %d of %d probes answered, want all", len(got.rtts), got.sent)
	}
	if lost := e.Stats().Pair("fra", "eu").Lost; lost != 20 {
		t.Errorf("fra->eu lost %d, want the 20 probes", lost)
	}
	if d := e.Stats().Pair("eu", "fra").Delivered; d != 0 {
		t.Errorf("eu->fra delivered %d, want 0 (no probe reached eu to be echoed)", d)
	}
	if err := e.SetLoss("fra", "eu", 0); err != nil {
		t.Fatal(err)
	}
	if got := run("fra", "eu"); len(got.rtts) != got.sent {
		t.Errorf("fra->eu mended: %d of %d probes answered, want all", len(got.rtts), got.sent)
	}
	for _, bad := range []struct {
		from, to string
		loss     float64
	}{{"fra", "eu", 1.5}, {"fra", "eu", -0.1}, {"fra", "ap", 1}, {"eu", "eu", 1}} {
		if err := e.SetLoss(bad.from, bad.to, bad.loss); err == nil {
			t.Errorf("SetLoss(%s, %s, %v) = nil, want an error", bad.from, bad.to, bad.loss)
		}
	}
}
