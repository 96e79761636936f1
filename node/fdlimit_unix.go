//go:build unix

package node

import "syscall"

// fdLimit is the process's open-file limit (RLIMIT_NOFILE's soft limit, which Go raises to
// the hard one at start); 0 if it cannot be read.
func fdLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<40 {
		return 0
	}
	return int(l.Cur)
}
