//go:build !linux

package h1

// testPollers: the portable poller, the only one built here.
var testPollers = []testPoller{portable, portableByDeadline}
