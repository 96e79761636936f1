package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	tu "github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/state"
)

// ticketDeadline bounds each handshake of these tests: a test that cannot finish fails
// within it rather than at go test's timeout.
const ticketDeadline = 5 * time.Second

// tlsPeer is a certificate for 127.0.0.1 and localhost and a pool trusting it.
type tlsPeer struct {
	cert *Reloader
	pool *x509.CertPool
}

func newTLSPeer(t *testing.T) tlsPeer {
	t.Helper()
	certFile, keyFile := tu.CertFiles(t)
	leaf := tu.WriteCert(t, certFile, keyFile, "tickets")
	r, err := NewReloader(certFile, keyFile, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tlsPeer{cert: r, pool: pool}
}

// serveTLS serves TLS on a loopback listener with the entry's kind of config (GetCertificate
// by the Reloader) and keys applied (none: crypto/tls's own): each connection is handshaken,
// sent one byte and closed. It returns the address.
func serveTLS(t *testing.T, p tlsPeer, keys *TicketKeys) string {
	t.Helper()
	cfg := &tls.Config{GetCertificate: p.cert.GetCertificate, MinVersion: tls.VersionTLS12}
	if keys != nil {
		keys.Apply(cfg)
	}
	return serveConfig(t, cfg)
}

func serveConfig(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	return tu.ServeTCP(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(ticketDeadline))
		tc := tls.Server(c, cfg)
		if tc.Handshake() == nil {
			tc.Write([]byte("x")) // after the NewSessionTicket of TLS 1.3
		}
	})
}

// resumes connects to addr with cache and reports whether the handshake resumed a session.
// It reads the server's byte so that a TLS 1.3 ticket sent after the handshake is taken.
func resumes(t *testing.T, p tlsPeer, addr string, cache tls.ClientSessionCache, version uint16) bool {
	t.Helper()
	d := tls.Dialer{
		NetDialer: &net.Dialer{Timeout: ticketDeadline},
		Config: &tls.Config{RootCAs: p.pool, ServerName: "localhost", ClientSessionCache: cache,
			MinVersion: version, MaxVersion: version},
	}
	ctx, cancel := context.WithTimeout(context.Background(), ticketDeadline)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ticketDeadline))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	return c.(*tls.Conn).ConnectionState().DidResume
}

var tlsVersions = []struct {
	name string
	v    uint16
}{{"TLS1.2", tls.VersionTLS12}, {"TLS1.3", tls.VersionTLS13}}

func newKeys(t *testing.T, dir string, clock *tu.Clock, log *tu.LogBuffer) *TicketKeys {
	t.Helper()
	cfg := TicketConfig{Dir: dir}
	if clock != nil {
		cfg.Clock = clock
	}
	if log != nil {
		cfg.Logger = zerolog.New(log)
	}
	return NewTicketKeys(cfg)
}

// TestTicketsResumeAcrossRestart: a client resumes with the same process, with a new one on
// the same state directory (a restart), and not with one on a fresh directory.
func TestTicketsResumeAcrossRestart(t *testing.T) {
	p := newTLSPeer(t)
	for _, tv := range tlsVersions {
		t.Run(tv.name, func(t *testing.T) {
			dir := t.TempDir()
			first := serveTLS(t, p, newKeys(t, dir, nil, nil))
			cache := tls.NewLRUClientSessionCache(8)
			if resumes(t, p, first, cache, tv.v) {
				t.Fatal("the first connection resumed")
			}
			if !resumes(t, p, first, cache, tv.v) {
				t.Fatal("the second connection to the same server did not resume")
			}

			restarted := serveTLS(t, p, newKeys(t, dir, nil, nil))
			if !resumes(t, p, restarted, cache, tv.v) {
				t.Error("a server started again on the same state directory did not resume the session")
			}

			fresh := serveTLS(t, p, newKeys(t, t.TempDir(), nil, nil))
			if resumes(t, p, fresh, cache, tv.v) {
				t.Error("a server on a fresh state directory resumed a session it never issued")
			}
		})
	}
}

// TestTicketsInMemoryOnly: without a state directory the keys live in the process: it
// resumes, another one does not.
func TestTicketsInMemoryOnly(t *testing.T) {
	p := newTLSPeer(t)
	k := newKeys(t, "", nil, nil)
	if k.Path() != "" || k.Len() != 1 {
		t.Fatalf("without a directory: path %q, %d keys; want none and one key", k.Path(), k.Len())
	}
	addr := serveTLS(t, p, k)
	cache := tls.NewLRUClientSessionCache(8)
	resumes(t, p, addr, cache, tls.VersionTLS13)
	if !resumes(t, p, addr, cache, tls.VersionTLS13) {
		t.Error("no resumption within the process")
	}
	if resumes(t, p, serveTLS(t, p, newKeys(t, "", nil, nil)), cache, tls.VersionTLS13) {
		t.Error("another process's keys resumed the session")
	}
}

// TestTicketKeysRotate: after a period a new key encrypts and the old one still decrypts;
// once the old key is TicketKeysKept periods old it is gone from memory and the file, and
// its tickets start anew.
func TestTicketKeysRotate(t *testing.T) {
	p := newTLSPeer(t)
	for _, tv := range tlsVersions {
		t.Run(tv.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := tu.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
			reg := prometheus.NewRegistry()
			k := NewTicketKeys(TicketConfig{Dir: dir, Clock: clock, Logger: zerolog.Nop(), Registerer: reg})
			addr := serveTLS(t, p, k)
			first := k.keys[0].key
			// Two clients of the first key's time: one comes back after the rotation, the
			// other (its ticket untouched since) after three periods.
			old, before := tls.NewLRUClientSessionCache(8), tls.NewLRUClientSessionCache(8)
			resumes(t, p, addr, old, tv.v)
			resumes(t, p, addr, before, tv.v)

			clock.Advance(TicketKeyPeriod - time.Second)
			if changed := k.Rotate(); changed || k.Len() != 1 {
				t.Fatalf("a second before the period: changed %v, %d keys; want no rotation", changed, k.Len())
			}
			clock.Advance(time.Second)
			if changed := k.Rotate(); !changed || k.Len() != 2 {
				t.Fatalf("after a period: changed %v, %d keys; want a new key beside the old", changed, k.Len())
			}
			second := k.keys[0].key
			if second == first || k.keys[1].key != first {
				t.Fatal("the new key is not first, the old second")
			}

			// The new key encrypts: a ticket issued now resumes on a server holding only it.
			fresh := tls.NewLRUClientSessionCache(8)
			resumes(t, p, addr, fresh, tv.v)
			if !resumes(t, p, onlyKey(t, p, second), fresh, tv.v) {
				t.Error("a ticket issued after the rotation is not under the new key")
			}
			// The old one decrypts: a ticket from before resumes.
			if !resumes(t, p, addr, before, tv.v) {
				t.Error("a ticket from before the rotation did not resume")
			}

			clock.Advance(TicketKeyPeriod)
			k.Rotate()
			if k.Len() != TicketKeysKept || k.keys[TicketKeysKept-1].key != first {
				t.Fatalf("after two periods: %d keys, the first last: %v; want %d", k.Len(),
					k.keys[k.Len()-1].key == first, TicketKeysKept)
			}
			clock.Advance(TicketKeyPeriod)
			k.Rotate()
			if k.Len() != TicketKeysKept {
				t.Fatalf("after three periods: %d keys, want %d", k.Len(), TicketKeysKept)
			}
			for _, h := range k.keys {
				if h.key == first {
					t.Fatal("the first key is still held after three periods")
				}
			}
			if resumes(t, p, addr, old, tv.v) {
				t.Error("a ticket of a key three periods old resumed")
			}
			file, err := os.ReadFile(filepath.Join(dir, TicketsFile))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(file, first[:]) {
				t.Error("the file still holds the dropped key")
			}
			if !bytes.Contains(file, second[:]) {
				t.Error("the file does not hold a key still kept")
			}
			if got := testutil.ToFloat64(k.rotations); got != 4 {
				t.Errorf("fenec_entry_tls_ticket_key_rotations_total = %v, want 4 (the start's, then three)", got)
			}
			if n, err := testutil.GatherAndCount(reg, "fenec_entry_tls_ticket_keys"); err != nil || n != 1 {
				t.Errorf("fenec_entry_tls_ticket_keys: %d series, %v", n, err)
			}
		})
	}
}

// onlyKey serves with key alone.
func onlyKey(t *testing.T, p tlsPeer, key [32]byte) string {
	t.Helper()
	cfg := &tls.Config{GetCertificate: p.cert.GetCertificate, MinVersion: tls.VersionTLS12}
	cfg.SetSessionTicketKeys([][32]byte{key})
	return serveConfig(t, cfg)
}

// TestTicketKeysAfterLongStop: keys on disk older than TicketKeysKept periods are dropped at
// the start, not kept because no rotation was due while the entry was down.
func TestTicketKeysAfterLongStop(t *testing.T) {
	dir := t.TempDir()
	clock := tu.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	k := newKeys(t, dir, clock, nil)
	k.Rotate()
	clock.Advance(TicketKeyPeriod)
	k.Rotate()
	old := k.keys[1].key

	clock.Advance(TicketKeysKept*TicketKeyPeriod - TicketKeyPeriod)
	again := newKeys(t, dir, clock, nil)
	if again.Len() != 2 {
		t.Fatalf("restarted after %v: %d keys, want the newest kept and a new one", 2*TicketKeyPeriod, again.Len())
	}
	for _, h := range again.keys {
		if h.key == old {
			t.Error("a key three periods old came back")
		}
	}
	clock.Advance(7 * 24 * time.Hour)
	if after := newKeys(t, dir, clock, nil); after.Len() != 1 {
		t.Errorf("restarted after a week: %d keys, want one new", after.Len())
	}
}

// TestTicketsFile: the file is 0600; damaged, foreign and odd files are moved aside, logged at
// warn without key material, and new keys made; temporary files of a crash are removed.
func TestTicketsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TicketsFile)
	var log tu.LogBuffer
	k := newKeys(t, dir, nil, &log)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no file after the start: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	good, _ := os.ReadFile(path)
	all := [][32]byte{k.keys[0].key}

	tests := []struct {
		name, result string
		make         func()
	}{
		{"a flipped bit", "damaged", func() {
			b := bytes.Clone(good)
			b[20] ^= 1
			os.WriteFile(path, b, 0o600)
		}},
		{"cut short", "damaged", func() { os.WriteFile(path, good[:len(good)-1], 0o600) }},
		{"empty", "damaged", func() { os.WriteFile(path, nil, 0o600) }},
		{"another file", "foreign", func() { os.WriteFile(path, []byte("ssl_session_ticket_key\n"), 0o600) }},
		{"a directory", "foreign", func() { os.Mkdir(path, 0o700) }},
	}
	for _, tt := range tests {
		os.RemoveAll(path)
		tt.make()
		var log tu.LogBuffer
		k := newKeys(t, dir, nil, &log)
		all = append(all, k.keys[0].key)
		if k.Len() != 1 || k.keys[0].key == all[0] {
			t.Errorf("%s: %d keys, the old one kept %v; want one new key", tt.name, k.Len(), k.keys[0].key == all[0])
		}
		text := log.String()
		if !strings.Contains(text, `"level":"warn"`) || !strings.Contains(text, "ignored ("+tt.result+")") ||
			!strings.Contains(text, "moved_to") {
			t.Errorf("%s: no warning naming it %s and where it went: %s", tt.name, tt.result, text)
		}
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: no new 0600 file: %v", tt.name, err)
		}
		if bad, _ := filepath.Glob(path + state.BadSuffix + "-*"); len(bad) == 0 {
			t.Errorf("%s: nothing moved aside", tt.name)
		}
		noKeyIn(t, tt.name, text, all)
	}
	noKeyIn(t, "the first start", log.String(), all)
	if bad, _ := filepath.Glob(path + state.BadSuffix + "-*"); len(bad) > state.KeepBad {
		t.Errorf("%d bad files kept, want at most %d", len(bad), state.KeepBad)
	}

	// A crash between the temporary file and the rename.
	stale := filepath.Join(dir, TicketsFile+".tmp-123")
	os.WriteFile(stale, good, 0o600)
	newKeys(t, dir, nil, nil)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file of an interrupted write is still there: %v", err)
	}
}

// noKeyIn fails if text holds any of keys in hex, base64 (standard or URL, padded or not) or
// raw.
func noKeyIn(t *testing.T, what, text string, keys [][32]byte) {
	t.Helper()
	lower := strings.ToLower(text)
	for _, k := range keys {
		forms := []string{hex.EncodeToString(k[:]), base64.StdEncoding.EncodeToString(k[:]),
			base64.RawStdEncoding.EncodeToString(k[:]), base64.URLEncoding.EncodeToString(k[:]),
			base64.RawURLEncoding.EncodeToString(k[:]), string(k[:])}
		for i, f := range forms {
			// Half a key is enough to give it away.
			if i == 0 && strings.Contains(lower, f[:32]) || i > 0 && strings.Contains(text, f[:len(f)/2]) {
				t.Errorf("%s: the log holds key material (form %d): %s", what, i, text)
			}
		}
	}
}

// TestTicketsUnreadableFileLeft: a file that cannot be read is left as it is and the keys are
// kept in memory. A link to itself cannot be read by anyone, root included (a mode-0000 file
// can by root, which CI runs as).
func TestTicketsUnreadableFileLeft(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TicketsFile)
	if err := os.Symlink(TicketsFile, path); err != nil { // a loop: every open fails (ELOOP)
		t.Fatal(err)
	}
	var log tu.LogBuffer
	k := newKeys(t, dir, nil, &log)
	if k.Path() != "" || k.Len() != 1 {
		t.Errorf("path %q, %d keys; want memory only and one key", k.Path(), k.Len())
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the unreadable file was touched: %v", err)
	}
	if !strings.Contains(log.String(), `"level":"error"`) {
		t.Errorf("no error logged: %s", log.String())
	}
}

// TestTicketsWriteFailureRetried: a write that fails is counted, logged and done at the next
// Rotate once the directory takes it again.
func TestTicketsWriteFailureRetried(t *testing.T) {
	dir := t.TempDir()
	clock := tu.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	var log tu.LogBuffer
	k := newKeys(t, dir, clock, &log)
	// The directory is taken away (a volume gone): the rotation's write fails.
	moved := dir + ".away"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	clock.Advance(TicketKeyPeriod)
	if !k.Rotate() {
		t.Fatal("Rotate after a period changed nothing")
	}
	if got := testutil.ToFloat64(k.writes.WithLabelValues("error")); got != 1 {
		t.Errorf("writes{error} = %v, want 1", got)
	}
	if !strings.Contains(log.String(), "writing the session ticket keys failed") {
		t.Errorf("the failure was not logged: %s", log.String())
	}
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	if changed := k.Rotate(); changed {
		t.Error("the retry rotated again")
	}
	b, err := os.ReadFile(filepath.Join(dir, TicketsFile))
	if err != nil || !bytes.Contains(b, k.keys[0].key[:]) {
		t.Errorf("the retry did not write the new key: %v", err)
	}
	noKeyIn(t, "the write failure", log.String(), [][32]byte{k.keys[0].key, k.keys[1].key})
}

func TestTicketsDecode(t *testing.T) {
	now := time.UnixMilli(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	keys := []ticketKey{{created: now.Add(-time.Hour), key: [32]byte{1}}, {created: now, key: [32]byte{2}}}
	got, err := decodeTickets(encodeTickets(keys))
	if err != nil || len(got) != 2 || got[0].key != keys[1].key || !got[0].created.Equal(now) {
		t.Fatalf("decode(encode) = %v, %v; want both, the newest first", got, err)
	}
	b := encodeTickets(keys)
	for n := range len(b) {
		if _, err := decodeTickets(b[:n]); err == nil {
			t.Fatalf("a file cut at %d of %d bytes decoded", n, len(b))
		}
	}
	b[8] = 2
	if _, err := decodeTickets(b); !errors.Is(err, errTicketsForeign) {
		t.Errorf("another format: %v, want foreign", err)
	}
}

// The keys are made at Config.Clock's time.
func TestTicketKeysOnTheClock(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	k := NewTicketKeys(TicketConfig{Clock: tu.NewClock(at), Logger: zerolog.Nop()})
	if got := k.keys[0].created; !got.Equal(at) {
		t.Errorf("the first key was made at %v, want the Clock's %v", got, at)
	}
}
