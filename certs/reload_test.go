package certs

import (
	"errors"
	"github.com/fenec/fenec-entry/internal/testutil"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestCertReloader(t *testing.T) {
	certFile, keyFile := testutil.CertFiles(t)
	testutil.WriteCert(t, certFile, keyFile, "first")
	logs := &testutil.LogBuffer{}
	log := zerolog.New(logs)
	r, err := NewReloader(certFile, keyFile, log)
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

	testutil.WriteCert(t, certFile, keyFile, "second")
	if !r.check() || cn() != "second" {
		t.Fatalf("after a change: serving %q, want second", cn())
	}

	// A half-written pair (new certificate, old key) keeps the certificate in use.
	keyPEM, _ := os.ReadFile(keyFile)
	testutil.WriteCert(t, certFile, keyFile, "third")
	testutil.WriteFile(t, keyFile, keyPEM)
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
	testutil.WriteCert(t, certFile, keyFile, "fourth")
	if !r.check() || cn() != "fourth" {
		t.Fatalf("after a good pair: serving %q, want fourth", cn())
	}
}

func TestCertReloaderErrorsNameTheFile(t *testing.T) {
	certFile, keyFile := testutil.CertFiles(t)
	nop := zerolog.Nop()
	tests := []struct {
		name  string
		setup func()
		flag  string
	}{
		{"no cert", func() {}, FileCert},
		{"no key", func() { testutil.WriteFile(t, certFile, []byte("x")) }, FileKey},
		{"not PEM", func() { testutil.WriteFile(t, keyFile, []byte("x")) }, FileCert},
		{"mismatch", func() {
			testutil.WriteCert(t, certFile, keyFile, "a")
			k, _ := os.ReadFile(keyFile)
			testutil.WriteCert(t, certFile, keyFile, "b")
			testutil.WriteFile(t, keyFile, k)
		}, FileCert},
	}
	for _, tt := range tests {
		tt.setup()
		_, err := NewReloader(certFile, keyFile, nop)
		var fe *FileError
		if !errors.As(err, &fe) || fe.Which != tt.flag {
			t.Errorf("%s: NewReloader = %v, want a *FileError about the %s file", tt.name, err, tt.flag)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: error shows key material: %v", tt.name, err)
		}
	}
}
