//go:build unix

package main

import "syscall"

// peek looks at socket fd without waiting or taking anything: n 0 and no error is the end,
// EAGAIN nothing yet.
func peek(fd uintptr) (n int, err error) {
	var b [1]byte
	n, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, err
}
