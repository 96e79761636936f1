//go:build !windows

package sockio

// supported: raw socket calls are built here (fd_linux.go, fd_other.go).
const supported = true

// errUnsupported is never returned here.
var errUnsupported error
