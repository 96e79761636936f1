// Package lab runs fenec-entry's pieces across a WAN on one machine (package wan). Its test,
// TestFleet (fleet_linux_test.go), builds the entry and the stand-in routers, starts a
// stand-in per region and an entry per PoP in the emulator's sites, and measures how the
// fleet routes, gossips, detects a frozen entry and copes with a cut link; see README.md.
package lab
