package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// CheckEvery is how often Watch checks the certificate files' modification times.
const CheckEvery = 5 * time.Second

// Which file an error is about.
const (
	FileCert = "cert" // the certificate chain (--tls-cert)
	FileKey  = "key"  // its private key (--tls-key)
	FileCA   = "ca"   // extra router CAs (--router-ca)
)

// FileError is a file that could not be read or used: which one (FileCert, FileKey, FileCA)
// and why. Its message never holds key material.
type FileError struct {
	Which string
	Msg   string
}

func (e *FileError) Error() string { return e.Which + ": " + e.Msg }

// Reloader serves the certificate of a certificate and a key file and loads it again when
// either file changes (its modification time or size). A reload that fails (a half-written
// file, a key that does not match yet) is logged and the certificate in use is kept; the next
// change of either file is tried again. GetCertificate and NotAfter are safe for concurrent
// use; Watch runs on one goroutine.
type Reloader struct {
	certFile, keyFile string
	log               zerolog.Logger

	cur atomic.Pointer[tls.Certificate] // never nil after NewReloader

	mu   sync.Mutex // guards seen
	seen fileStamps // of the files as last tried, loaded or not
}

// fileStamps identify a version of the certificate and key files.
type fileStamps struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// NewReloader loads the certificate once. Its errors are *FileError naming the file at fault.
func NewReloader(certFile, keyFile string, log zerolog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log}
	st, err := r.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(cert)
	r.seen = st
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load(), nil
}

// NotAfter is when the certificate in use expires.
func (r *Reloader) NotAfter() time.Time {
	if leaf := r.cur.Load().Leaf; leaf != nil {
		return leaf.NotAfter
	}
	return time.Time{}
}

// Watch checks the files every interval (CheckEvery in production) until ctx is done.
func (r *Reloader) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.check()
		}
	}
}

// check reloads the certificate if either file changed since it was last tried, and reports
// whether a new certificate is now served.
func (r *Reloader) check() bool {
	st, err := r.stamps()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		// A file being replaced may be briefly missing: keep serving, say it once.
		if r.seen != (fileStamps{}) {
			r.log.Warn().Err(err).Msg("tls certificate files unreadable; keeping the certificate in use")
		}
		r.seen = fileStamps{}
		return false
	}
	if st == r.seen {
		return false
	}
	r.seen = st
	cert, err := r.load()
	if err != nil {
		r.log.Warn().Err(err).Msg("tls certificate reload failed; keeping the certificate in use")
		return false
	}
	r.cur.Store(cert)
	r.log.Info().Time("not_after", cert.Leaf.NotAfter).Strs("names", cert.Leaf.DNSNames).
		Msg("tls certificate reloaded")
	return true
}

func (r *Reloader) stamps() (fileStamps, error) {
	c, err := os.Stat(r.certFile)
	if err != nil {
		return fileStamps{}, &FileError{Which: FileCert, Msg: err.Error()}
	}
	k, err := os.Stat(r.keyFile)
	if err != nil {
		return fileStamps{}, &FileError{Which: FileKey, Msg: err.Error()}
	}
	return fileStamps{certMod: c.ModTime(), keyMod: k.ModTime(), certSize: c.Size(), keySize: k.Size()}, nil
}

// load reads and parses both files. The errors never hold key material (the standard
// library's X509KeyPair errors do not) and are *FileError.
func (r *Reloader) load() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return nil, &FileError{Which: FileCert, Msg: err.Error()}
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return nil, &FileError{Which: FileKey, Msg: err.Error()}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &FileError{Which: FileCert, Msg: fmt.Sprintf("%s with the key %s: %v", r.certFile, r.keyFile, err)}
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, &FileError{Which: FileCert, Msg: fmt.Sprintf("%s: %v", r.certFile, err)}
		}
	}
	return &cert, nil
}

// RouterTLS returns the TLS configuration for https:// routers: the system roots plus the
// certificates of the PEM file path. Its errors are *FileError (FileCA).
func RouterTLS(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{Which: FileCA, Msg: err.Error()}
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, &FileError{Which: FileCA, Msg: fmt.Sprintf("%s holds no PEM certificate", path)}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
