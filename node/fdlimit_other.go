//go:build !unix

package node

// fdLimit is 0: this system has no open-file limit to read, and --max-conns defaults to
// noLimitMaxConns.
func fdLimit() int { return 0 }
