// Package testutil holds the helpers the module's tests share: waiting for a condition
// within a deadline (Eventually, Poll), capturing logs written from many goroutines
// (LogBuffer), a clock that moves only when told (Clock), and loopback TCP servers and
// connection pairs (ServeTCP, TCPPair), and a path to a TCP address that a test cuts and
// heals (Link).
//
// It knows nothing of the packages it tests, and no code outside _test.go files may import
// it. Every wait it offers is bounded by a duration or a context and ends with a message
// naming what it waited for, so that a regression fails its test instead of hanging until
// go test's -timeout.
package testutil
