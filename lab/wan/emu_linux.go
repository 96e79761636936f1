//go:build linux

package wan

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fenec/fenec-entry/internal/clock"
)

// tunName is each site's TUN device, inside its own namespace.
const tunName = "wan0"

// mtu is the TUN devices' MTU (the kernel's default for TUN); reads use a buffer of maxPacket.
const (
	mtu       = 1500
	maxPacket = 65535
)

// emulators numbers the emulators of this process, for namespace names.
var emulators atomic.Uint64

// Emulator is a running WAN. Close stops it and removes every namespace and device it made.
type Emulator struct {
	cfg    Config
	prefix string             // namespace names are prefix + site
	addrs  []netip.Addr       // by site index
	index  map[string]int     // site name -> index
	byAddr map[netip.Addr]int // address -> site index
	tuns   []*os.File         // by site index
	lines  [][]*line          // [from][to]; nil when from == to

	unroutable atomic.Uint64

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	made      []string // namespaces created, to remove
}

// Start creates a namespace per site with its TUN device, address and routes, and starts
// carrying packets between them. It needs root. On error it removes what it made. The
// emulator runs until Close (ctx only bounds the setup).
func Start(ctx context.Context, cfg Config) (*Emulator, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	e := &Emulator{
		cfg:    cfg,
		prefix: fmt.Sprintf("fwan-%d-%d-", os.Getpid(), emulators.Add(1)),
		index:  make(map[string]int, len(cfg.Sites)),
		byAddr: make(map[netip.Addr]int, len(cfg.Sites)),
	}
	for i, s := range cfg.Sites {
		e.index[s] = i
		e.addrs = append(e.addrs, siteAddr(i))
		e.byAddr[siteAddr(i)] = i
	}
	if err := e.setup(ctx); err != nil {
		return nil, errors.Join(err, e.teardown())
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	n := len(cfg.Sites)
	e.lines = make([][]*line, n)
	for i, a := range cfg.Sites {
		e.lines[i] = make([]*line, n)
		for j, b := range cfg.Sites {
			if i == j {
				continue
			}
			l := newLine(a, b, cfg.Link(a, b), cfg.QueueLen, cfg.Seed, i*n+j)
			e.lines[i][j] = l
			dst := e.tuns[j]
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				l.run(runCtx, func(b []byte) error {
					_, err := dst.Write(b)
					return err
				})
			}()
		}
	}
	for i := range cfg.Sites {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.read(i)
		}()
	}
	return e, nil
}

// setup makes each site's namespace and TUN device.
func (e *Emulator) setup(ctx context.Context) error {
	for i, s := range e.cfg.Sites {
		ns := e.prefix + s
		if out, err := exec.CommandContext(ctx, "ip", "netns", "add", ns).CombinedOutput(); err != nil {
			return fmt.Errorf("wan: ip netns add %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
		}
		e.made = append(e.made, ns)
		var tun *os.File
		err := inNamespace(ns, func() error {
			var err error
			tun, err = configureSite(e.addrs[i])
			return err
		})
		if err != nil {
			return fmt.Errorf("wan: site %s: %w", s, err)
		}
		e.tuns = append(e.tuns, tun)
	}
	return nil
}

// configureSite runs in a site's namespace: it turns IPv6 off (so the TUN carries only the
// lab's IPv4), brings loopback up, and creates the TUN device with addr/16, up, which routes
// the whole lab range through it.
func configureSite(addr netip.Addr) (*os.File, error) {
	// Best effort: a kernel without IPv6 has no such files.
	for _, p := range []string{"default", "all"} {
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+p+"/disable_ipv6", []byte("1"), 0)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(tunName)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF: %w", err)
	}
	// os.NewFile sees the descriptor is non-blocking and puts it in the runtime's poller:
	// reads park the goroutine, not a thread, and Close wakes them.
	tun := os.NewFile(uintptr(fd), "/dev/net/tun:"+tunName)
	if err := configureLinks(addr); err != nil {
		tun.Close()
		return nil, err
	}
	return tun, nil
}

// configureLinks brings lo up and gives the TUN its address, netmask, MTU and up flag, by
// ioctl on a socket of the current thread's namespace.
func configureLinks(addr netip.Addr) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	up := func(name string) error {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
			return fmt.Errorf("%s: get flags: %w", name, err)
		}
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
		if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
			return fmt.Errorf("%s: set flags: %w", name, err)
		}
		return nil
	}
	if err := up("lo"); err != nil {
		return err
	}
	set := func(req uint, what string, fill func(*unix.Ifreq) error) error {
		ifr, err := unix.NewIfreq(tunName)
		if err != nil {
			return err
		}
		if err := fill(ifr); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(s, req, ifr); err != nil {
			return fmt.Errorf("%s: set %s: %w", tunName, what, err)
		}
		return nil
	}
	a4 := addr.As4()
	mask := [4]byte{255, 255, 0, 0}
	if err := set(unix.SIOCSIFADDR, "address", func(r *unix.Ifreq) error { return r.SetInet4Addr(a4[:]) }); err != nil {
		return err
	}
	if err := set(unix.SIOCSIFNETMASK, "netmask", func(r *unix.Ifreq) error { return r.SetInet4Addr(mask[:]) }); err != nil {
		return err
	}
	if err := set(unix.SIOCSIFMTU, "mtu", func(r *unix.Ifreq) error { r.SetUint32(mtu); return nil }); err != nil {
		return err
	}
	return up(tunName)
}

// inNamespace runs f on a thread of its own that has joined namespace ns (a name under
// /run/netns), then returns the thread to this process's namespace. If it cannot return, the
// thread is left locked and ends with its goroutine, so no other goroutine ever runs in ns by
// mistake.
func inNamespace(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open namespace %s: %w", ns, err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread is discarded when this goroutine returns.
			errc <- errors.Join(ferr, fmt.Errorf("return from namespace %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// read carries the packets that site i's TUN gives (the packets its programs send to other
// sites) to the pairs' lines. It returns when the TUN is closed.
func (e *Emulator) read(i int) {
	tun := e.tuns[i]
	buf := make([]byte, maxPacket)
	for {
		n, err := tun.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// A TUN read fails only when the device is going away; don't spin.
			time.Sleep(time.Millisecond)
			continue
		}
		now := clock.System.Now() // a packet's delay is real: the clock of the line's timer
		dst, ok := ipv4Dst(buf[:n])
		j, known := e.byAddr[dst]
		if !ok || !known || j == i {
			e.unroutable.Add(1)
			continue
		}
		e.lines[i][j].offer(append([]byte(nil), buf[:n]...), now)
	}
}

// Sites returns the sites' names, in the order of the configuration.
func (e *Emulator) Sites() []string { return append([]string(nil), e.cfg.Sites...) }

// Addr returns a site's address (invalid if there is no such site).
func (e *Emulator) Addr(site string) netip.Addr {
	i, ok := e.index[site]
	if !ok {
		return netip.Addr{}
	}
	return e.addrs[i]
}

// Namespace returns the name of a site's network namespace, for ip netns exec (empty if there
// is no such site). Names are fwan-<pid>-<n>-<site>: unique to this process and emulator.
func (e *Emulator) Namespace(site string) string {
	if _, ok := e.index[site]; !ok {
		return ""
	}
	return e.prefix + site
}

// Link returns the link from one site to another as it is now: as configured, with the loss
// SetLoss gave it last (the zero Link if there is no such pair).
func (e *Emulator) Link(from, to string) Link {
	i, ok1 := e.index[from]
	j, ok2 := e.index[to]
	if !ok1 || !ok2 || i == j {
		return Link{}
	}
	return e.lines[i][j].link()
}

// SetLoss changes the loss of the link from one site to another while the emulator runs, for
// the packets sent from now on (those in flight are delivered). A loss of 1 cuts the link
// that way: call it both ways to cut a pair, and with the configured loss to mend it.
func (e *Emulator) SetLoss(from, to string, loss float64) error {
	if err := checkLoss(loss); err != nil {
		return err
	}
	i, ok1 := e.index[from]
	j, ok2 := e.index[to]
	if !ok1 || !ok2 || i == j {
		return fmt.Errorf("wan: no link %s->%s", from, to)
	}
	e.lines[i][j].setLoss(loss)
	return nil
}

// Command returns a command that runs name with args in a site's namespace (by ip netns
// exec). The caller starts it, stops it, and waits for it before Close.
func (e *Emulator) Command(ctx context.Context, site, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", e.Namespace(site), name}, args...)...)
}

// Do runs f on a thread that is in a site's namespace. Sockets that f opens belong to the site
// and can be used from any goroutine afterwards; goroutines that f starts do not run in the
// site (a namespace belongs to a thread).
func (e *Emulator) Do(site string, f func() error) error {
	if _, ok := e.index[site]; !ok {
		return fmt.Errorf("wan: no site %q", site)
	}
	return inNamespace(e.prefix+site, f)
}

// Stats returns the counts so far.
func (e *Emulator) Stats() Stats {
	var s Stats
	for i := range e.lines {
		for j := range e.lines[i] {
			if l := e.lines[i][j]; l != nil {
				s.Pairs = append(s.Pairs, l.stats())
			}
		}
	}
	s.Unroutable = e.unroutable.Load()
	return s
}

// Close stops the emulator, drops the packets in flight, and removes every namespace (and so
// every device) it made. It is safe to call more than once.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		if e.cancel != nil {
			e.cancel()
		}
		e.closeErr = e.teardown()
		e.wg.Wait()
	})
	return e.closeErr
}

// teardown closes the TUN devices (which removes them) and deletes the namespaces made.
func (e *Emulator) teardown() error {
	var errs []error
	for _, t := range e.tuns {
		if err := t.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, ns := range e.made {
		// Not bound to a context: removal must happen even when the caller's deadline passed.
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("wan: ip netns del %s: %v: %s", ns, err, strings.TrimSpace(string(out))))
		}
	}
	e.made = nil
	return errors.Join(errs...)
}

// RemoveStale deletes the namespaces that emulators of processes no longer running left
// behind (a process killed before its Close: its TUN devices went with it, its namespaces did
// not). Namespaces of running processes are left alone. It returns the names it removed.
func RemoveStale() ([]string, error) {
	entries, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, ent := range entries {
		rest, ok := strings.CutPrefix(ent.Name(), "fwan-")
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue // running (or not ours to judge)
		}
		if out, err := exec.Command("ip", "netns", "del", ent.Name()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("wan: ip netns del %s: %v: %s", ent.Name(), err, strings.TrimSpace(string(out))))
			continue
		}
		removed = append(removed, ent.Name())
	}
	return removed, errors.Join(errs...)
}

// Missing says what this host lacks to run an emulator: root, /dev/net/tun or the ip command
// (iproute2); "" if nothing.
func Missing() string {
	switch {
	case os.Geteuid() != 0:
		return "root (it creates network namespaces and TUN devices)"
	case fileMissing("/dev/net/tun"):
		return "/dev/net/tun"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "the ip command (iproute2)"
	}
	return ""
}

func fileMissing(path string) bool {
	_, err := os.Stat(path)
	return err != nil
}
