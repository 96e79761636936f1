package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at build time:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/fenec-entry
//
// Left unset, they come from the module version and the VCS information the go command
// stamps into the binary (runtime/debug.ReadBuildInfo), else "dev" and "unknown".
var (
	version = "dev"
	commit  = ""
)

// buildInfo is what `fenec-entry version` prints.
type buildInfo struct {
	version  string
	commit   string
	modified bool // built from a tree with uncommitted changes
	goVer    string
	platform string
}

func readBuildInfo() buildInfo {
	b := buildInfo{version: version, commit: commit, goVer: runtime.Version(), platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					b.commit = s.Value
				}
			case "vcs.modified":
				b.modified = commit == "" && s.Value == "true"
			}
		}
	}
	if b.commit == "" {
		b.commit = "unknown"
	}
	return b
}

// String is the line `fenec-entry version` prints.
func (b buildInfo) String() string {
	c := b.commit
	if b.modified {
		c += " (modified)"
	}
	if b.version != "" && strings.HasPrefix(b.commit, b.version) {
		// Built with the commit as its version (-X main.version=$(git rev-parse --short
		// HEAD)): said once.
		return fmt.Sprintf("fenec-entry commit %s %s %s", c, b.goVer, b.platform)
	}
	return fmt.Sprintf("fenec-entry %s commit %s %s %s", b.version, c, b.goVer, b.platform)
}

// short is the version an entry reports (status, start line, serf tag): the version, and for
// a development build the commit's first 12 digits too.
func (b buildInfo) short() string {
	if b.version != "dev" || b.commit == "unknown" {
		return b.version
	}
	c := b.commit
	if len(c) > 12 {
		c = c[:12]
	}
	if b.modified {
		c += "-modified"
	}
	return b.version + "-" + c
}
