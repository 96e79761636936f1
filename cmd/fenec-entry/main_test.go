package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestRunExitStatus(t *testing.T) {
	env := envOf(map[string]string{"FLY_REGION": "fra", "FLY_MACHINE_ID": "m1"})
	tests := []struct {
		name       string
		args       []string
		status     int
		stdout     string // contained in stdout
		stderrLine string // stderr is exactly one line containing this ("" for no stderr)
	}{
		{"version", []string{"version"}, 0, "fenec-entry ", ""},
		{"help", []string{"help"}, 0, "Usage: fenec-entry <command>", ""},
		{"serve help", []string{"serve", "--help"}, 0, "FENEC_ENTRY_ROUTERS", ""},
		{"no command", nil, 2, "", "\x00"},
		{"unknown command", []string{"start"}, 2, "", `unknown command "start"`},
		{"flag before command", []string{"--gossip-key=c2VjcmV0", "serve"}, 2, "", "flags go after the command"},
		{"version with arguments", []string{"version", "--json"}, 2, "", "takes no arguments"},
		{"unknown flag", []string{"serve", "--routers", testRouters, "--nope"}, 2, "", "--nope: unknown flag"},
		{"bad value", []string{"serve", "--routers", "eu=ftp://r:1"}, 2, "", "--routers: "},
		{"config error from a file", []string{"serve", "--routers", testRouters, "--router-ca", "/nonexistent/ca.pem",
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, 2, "", "--router-ca: "},
		{"geoip file missing", []string{"serve", "--routers", testRouters, "--geoip", "/nonexistent/geo.mmdb",
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, 2, "", "--geoip: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(tt.args, &stdout, &stderr, env)
			if status != tt.status {
				t.Errorf("status %d, want %d (stderr %q)", status, tt.status, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout.String(), tt.stdout)
			}
			switch tt.stderrLine {
			case "":
				if stderr.Len() != 0 {
					t.Errorf("stderr %q, want none", stderr.String())
				}
			case "\x00": // usage
				if stderr.Len() == 0 {
					t.Error("no usage on stderr")
				}
			default:
				if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); len(lines) != 1 ||
					!strings.Contains(lines[0], tt.stderrLine) {
					t.Errorf("stderr %q, want one line containing %q", stderr.String(), tt.stderrLine)
				}
				if strings.Contains(stderr.String(), "c2VjcmV0") {
					t.Errorf("stderr shows a secret: %q", stderr.String())
				}
			}
		})
	}
}

func TestVersionLine(t *testing.T) {
	b := readBuildInfo()
	line := b.String()
	for _, want := range []string{"fenec-entry ", "commit ", runtime.Version()} {
		if !strings.Contains(line, want) {
			t.Errorf("version line %q lacks %q", line, want)
		}
	}
	old := version
	defer func() { version = old }()
	version = "v1.2.3"
	if got := readBuildInfo().short(); got != "v1.2.3" {
		t.Errorf("short() = %q with -X main.version=v1.2.3", got)
	}
	if got := (buildInfo{version: "dev", commit: "0123456789abcdef", modified: true}).short(); got != "dev-0123456789ab-modified" {
		t.Errorf("short() of a dev build = %q", got)
	}
}
