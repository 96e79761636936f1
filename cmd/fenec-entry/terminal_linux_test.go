package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// openPTY opens a pseudo-terminal: what the entry writes to slave, the test reads from master.
func openPTY() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		return nil, nil, fmt.Errorf("pty number: %w", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

// An operator runs serve at a terminal and presses Ctrl-C: stderr says, in a plain sentence,
// that the entry drains and for how long, and that a second Ctrl-C stops it at once; a second
// one does (exit status 1, long before --drain ends).
func TestServeCtrlCAtATerminal(t *testing.T) {
	bin := binary(t)
	master, slave, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	if terminal(slave) == nil {
		t.Fatal("a pseudo-terminal is not taken for a terminal")
	}
	const drain = 30 * time.Second
	cmd := exec.Command(bin, "serve", "--routers", "eu=http://127.0.0.1:1", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--drain", drain.String())
	cmd.Env = cleanEnv("FENEC_ENTRY_POP=tty", "FENEC_ENTRY_NODE=tty-1")
	cmd.Stderr = slave
	if err := cmd.Start(); err != nil {
		slave.Close()
		t.Fatal(err)
	}
	slave.Close() // the child holds it now; once it exits, reading master ends
	waited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(waited) }()
	defer func() {
		select {
		case <-waited:
		default:
			cmd.Process.Kill()
			<-waited
		}
	}()
	var out testutil.LogBuffer
	go io.Copy(&out, master) // ends with EIO once the child is gone and master is closed

	// The signals are watched before the entry starts (serve, then node.Run).
	testutil.Eventually(t, 10*time.Second, "the start line", func() bool { return strings.Contains(out.String(), `"message":"entry started"`) })
	cmd.Process.Signal(os.Interrupt)
	const first = "fenec-entry: interrupt: draining for 30s (--drain), then up to 10s for open requests; Ctrl-C again stops at once"
	testutil.Eventually(t, 5*time.Second, "the drain notice on the terminal", func() bool { return strings.Contains(out.String(), first) })

	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	select {
	case <-waited:
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) || ee.ExitCode() != 1 {
			t.Errorf("after a second Ctrl-C: %v, want exit status 1", waitErr)
		}
		if took := time.Since(sent); took > 5*time.Second {
			t.Errorf("the second Ctrl-C took %v to stop the entry", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a second Ctrl-C did not stop the entry (output %q)", out.String())
	}
	testutil.Eventually(t, 5*time.Second, "the second notice", func() bool {
		return strings.Contains(out.String(), "fenec-entry: interrupt again: stopping at once")
	})
}
