package node

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestCertReloader(t *testing.T) {
	certFile, keyFile := tempFiles(t)
	writeCert(t, certFile, keyFile, "first")
	log, logs := testLogger(t)
	r, err := newCertReloader(certFile, keyFile, log)
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		c, _ := r.GetCertificate(nil)
		return c.Leaf.Subject.CommonName
	}
	if cn() != "first" {
		t.Fatalf("serving %q, want first", cn())
	}
	if r.check() {
		t.Error("check() reloaded files that did not change")
	}

	writeCert(t, certFile, keyFile, "second")
	if !r.check() || cn() != "second" {
		t.Fatalf("after a change: serving %q, want second", cn())
	}

	// A half-written pair (new certificate, old key) keeps the certificate in use.
	keyPEM, _ := os.ReadFile(keyFile)
	writeCert(t, certFile, keyFile, "third")
	writeFile(t, keyFile, keyPEM)
	if r.check() || cn() != "second" {
		t.Fatalf("after a mismatched pair: serving %q, want second kept", cn())
	}
	if !strings.Contains(logs.String(), "reload failed") {
		t.Errorf("the failed reload was not logged: %s", logs)
	}
	// A missing file keeps it too.
	os.Remove(certFile)
	if r.check() || cn() != "second" {
		t.Fatalf("after a removal: serving %q, want second kept", cn())
	}
	// And the next good pair is taken.
	writeCert(t, certFile, keyFile, "fourth")
	if !r.check() || cn() != "fourth" {
		t.Fatalf("after a good pair: serving %q, want fourth", cn())
	}
}

func TestCertReloaderErrorsNameTheFlag(t *testing.T) {
	certFile, keyFile := tempFiles(t)
	nop := zerolog.Nop()
	tests := []struct {
		name  string
		setup func()
		flag  string
	}{
		{"no cert", func() {}, "tls-cert"},
		{"no key", func() { writeFile(t, certFile, []byte("x")) }, "tls-key"},
		{"not PEM", func() { writeFile(t, keyFile, []byte("x")) }, "tls-cert"},
		{"mismatch", func() {
			writeCert(t, certFile, keyFile, "a")
			k, _ := os.ReadFile(keyFile)
			writeCert(t, certFile, keyFile, "b")
			writeFile(t, keyFile, k)
		}, "tls-cert"},
	}
	for _, tt := range tests {
		tt.setup()
		_, err := newCertReloader(certFile, keyFile, nop)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != tt.flag {
			t.Errorf("%s: newCertReloader = %v, want a *ConfigError naming --%s", tt.name, err, tt.flag)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: error shows key material: %v", tt.name, err)
		}
	}
}
