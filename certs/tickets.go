package certs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/state"
)

// Session ticket keys: the entry's own instead of crypto/tls's automatic ones (random per
// process, 24 h each, valid 7 days), so that they can outlive the process (--state-dir) and
// be gone from memory and disk sooner (docs/DECISIONS.md, "TLS session tickets").
const (
	// TicketKeyPeriod is how long a key encrypts new tickets before a new one takes over
	// (Caddy's default; half of Go's automatic 24 h).
	TicketKeyPeriod = 12 * time.Hour

	// TicketKeysKept is how many keys are held, the newest first: the newest encrypts,
	// all decrypt. A key is dropped (memory and file) once TicketKeysKept periods old, so a
	// ticket resumes for 24 to 36 h after it was issued, and no key lives longer than 36 h.
	TicketKeysKept = 3

	// TicketsFile is the keys' file in the state directory.
	TicketsFile = "tls-tickets.keys"

	// TicketCheckEvery is how often Run asks the clock whether a rotation is due: a
	// rotation comes at most this late.
	TicketCheckEvery = time.Minute
)

const ticketsTempPattern = TicketsFile + ".tmp-*"

// The file, little endian, written whole each time (temporary file, fsync, rename):
//
//	magic    "FENECTKT" (8 bytes)
//	format   1 byte: 1
//	count    1 byte: keys that follow, 1 to maxFileKeys
//	keys     count × (created: 8 bytes, Unix milliseconds; key: 32 bytes), newest first
//	check    32 bytes: SHA-256 of everything before it
//
// The checksum finds damage (a cut, a flipped bit); it is no secret. The file's secrecy is
// its mode, 0600, and the directory's owner.
const (
	ticketsMagic  = "FENECTKT"
	ticketsFormat = 1
	maxFileKeys   = 16 // more than TicketKeysKept, so that a later build keeping more is still read
	fileKeySize   = 8 + 32
)

var (
	errTicketsForeign = errors.New("not a session ticket key file of format 1")
	errTicketsDamaged = errors.New("damaged (cut short or does not check)")
)

// TicketConfig configures TicketKeys.
type TicketConfig struct {
	// Dir is the state directory (--state-dir), already checked writable by package
	// state; "" keeps the keys in memory only: tickets resume within the process's life.
	Dir string

	// Clock is the time source of the rotation and of the keys' ages; nil: the system clock.
	Clock clock.Clock

	Logger zerolog.Logger

	// Registerer receives the keys' metrics; nil registers none.
	Registerer prometheus.Registerer
}

// ticketKey is one session ticket key and when it was made.
type ticketKey struct {
	created time.Time
	key     [32]byte
}

// TicketKeys holds the entry's session ticket keys, newest first, makes a new one every
// TicketKeyPeriod, drops those TicketKeysKept periods old, and sets them on every
// tls.Config given to Apply (tls.Config.SetSessionTicketKeys, which turns crypto/tls's own
// rotation off for that config). With a Dir, the keys are written to TicketsFile at every
// change and read back by NewTicketKeys, so that a restarted entry resumes the sessions of
// the previous process. Key bytes are never logged and never exported. Its methods are safe
// for concurrent use.
type TicketKeys struct {
	cfg  TicketConfig
	path string // "" without Dir, or when the file could not be read (left as it is)
	log  zerolog.Logger

	mu      sync.Mutex // guards the following
	keys    []ticketKey
	configs []*tls.Config
	dirty   bool // the keys changed since the file was last written (a write failed)

	rotations prometheus.Counter
	writes    *prometheus.CounterVec
}

// NewTicketKeys reads the keys of cfg.Dir's TicketsFile, if any, and makes a new key if none
// is fresh enough; call it before the listener serves. A damaged or foreign file is moved
// aside (state.MoveAside) and logged at warn, an unreadable one logged at error and left
// (the keys then stay in memory until the next start): neither is an error.
func NewTicketKeys(cfg TicketConfig) *TicketKeys {
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	t := &TicketKeys{
		cfg: cfg,
		log: cfg.Logger.With().Str("component", "tls").Logger(),
		rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_tls_ticket_key_rotations_total",
			Help: "TLS session ticket keys made: at a start without a fresh key on disk, then one every 12 h.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_tls_ticket_key_writes_total",
			Help: "Writes of the TLS session ticket keys' file in --state-dir, by result (ok, error).",
		}, []string{"result"}),
	}
	t.writes.WithLabelValues("ok")
	t.writes.WithLabelValues("error")
	if cfg.Dir != "" {
		t.path = filepath.Join(cfg.Dir, TicketsFile)
		t.removeTemps()
		t.keys = t.load()
	} else {
		t.log.Info().Msg("tls: session ticket keys kept in memory only (no --state-dir): a restart starts new sessions")
	}
	t.Rotate()
	if r := cfg.Registerer; r != nil {
		r.MustRegister(t.rotations, t.writes, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_entry_tls_ticket_keys",
			Help: "TLS session ticket keys held: the newest encrypts new tickets, all decrypt (at most 3).",
		}, func() float64 { return float64(t.Len()) }))
	}
	return t
}

// Path is the keys' file; "" when they are kept in memory only.
func (t *TicketKeys) Path() string { return t.path }

// Len is the number of keys held.
func (t *TicketKeys) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// Apply sets the keys on c now and at every later change. c must be the config the
// handshakes use (the one passed to tls.Server, not a Clone: a clone keeps the keys it was
// made with). A config that GetConfigForClient returns uses c's keys unless it has keys of
// its own (crypto/tls's Config.ticketKeys); GetCertificate does not change them.
func (t *TicketKeys) Apply(c *tls.Config) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.configs = append(t.configs, c)
	c.SetSessionTicketKeys(t.rawLocked())
}

// Run calls Rotate every interval (TicketCheckEvery in production) until ctx is done.
func (t *TicketKeys) Run(ctx context.Context, every time.Duration) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			t.Rotate()
		}
	}
}

// Rotate drops the keys TicketKeysKept periods old (or made more than a period ahead of the
// clock), makes a new one if the newest is a period old or none is left, sets the keys on
// the applied configs and writes the file. It reports whether the keys changed; a write
// that fails is logged and tried again at the next call.
func (t *TicketKeys) Rotate() (changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Clock.Now()
	kept := t.keys[:0]
	dropped := 0
	for _, k := range t.keys {
		age := now.Sub(k.created)
		if age >= TicketKeysKept*TicketKeyPeriod || age < -TicketKeyPeriod || len(kept) == TicketKeysKept {
			dropped++
			continue
		}
		kept = append(kept, k)
	}
	clear(t.keys[len(kept):]) // zero what is left of the dropped keys (the kept moved over the others)
	t.keys = kept
	made, first := false, len(t.keys) == 0
	if first || now.Sub(t.keys[0].created) >= TicketKeyPeriod {
		k := ticketKey{created: now}
		rand.Read(k.key[:]) // never fails: it crashes the program instead (Go 1.24 on)
		// Room for the new one.
		if len(t.keys) == TicketKeysKept {
			clear(t.keys[len(t.keys)-1].key[:])
			t.keys = t.keys[:len(t.keys)-1]
			dropped++
		}
		t.keys = slices.Insert(t.keys, 0, k)
		t.rotations.Inc()
		made = true
	}
	changed = made || dropped > 0
	if changed {
		raw := t.rawLocked()
		for _, c := range t.configs {
			c.SetSessionTicketKeys(raw)
		}
		msg := "tls: session ticket keys rotated"
		if first {
			msg = "tls: session ticket key made"
		}
		t.log.Info().Bool("new_key", made).Int("dropped", dropped).Int("keys", len(t.keys)).
			Time("newest_created", t.keys[0].created).Msg(msg)
		t.dirty = true
	}
	if t.dirty && t.path != "" {
		t.writeLocked()
	}
	return changed
}

// rawLocked is the keys as crypto/tls takes them. t.mu is held.
func (t *TicketKeys) rawLocked() [][32]byte {
	raw := make([][32]byte, len(t.keys))
	for i, k := range t.keys {
		raw[i] = k.key
	}
	return raw
}

// load reads the file at start. It never fails: see NewTicketKeys.
func (t *TicketKeys) load() []ticketKey {
	// Stat first: opening a named pipe would wait for a writer.
	fi, err := os.Stat(t.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.log.Info().Str("file", t.path).Msg("tls: no session ticket keys on disk yet: making a new one")
		return nil
	case err == nil && !fi.Mode().IsRegular():
		t.reject("foreign", fmt.Errorf("%w (not a regular file)", errTicketsForeign))
		return nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		t.log.Error().Err(err).Str("file", t.path).
			Msg("tls: cannot read the session ticket keys' file: left as it is; new keys kept in memory only")
		t.path = ""
		return nil
	}
	defer clear(b)
	keys, err := decodeTickets(b)
	if err != nil {
		result := "damaged"
		if errors.Is(err, errTicketsForeign) {
			result = "foreign"
		}
		t.reject(result, err)
		return nil
	}
	now := t.cfg.Clock.Now()
	t.log.Info().Str("file", t.path).Int("keys", len(keys)).Time("newest_created", keys[0].created).
		Stringer("newest_age", now.Sub(keys[0].created).Round(time.Second)).
		Msg("tls: session ticket keys restored: clients of the previous process resume")
	return keys
}

// reject logs a damaged or foreign file (never its bytes) and moves it aside.
func (t *TicketKeys) reject(result string, why error) {
	ev := t.log.Warn().Str("file", t.path).Str("reason", why.Error())
	if a, err := state.MoveAside(t.path, t.cfg.Clock.Now()); err != nil {
		ev = ev.AnErr("move_aside", err)
	} else {
		ev = a.Log(ev)
	}
	ev.Msg("tls: session ticket keys' file ignored (" + result + "): making new keys; earlier sessions start anew")
}

// removeTemps removes the temporary files an interrupted write left (they hold keys).
func (t *TicketKeys) removeTemps() {
	stale, _ := filepath.Glob(filepath.Join(t.cfg.Dir, ticketsTempPattern))
	for _, f := range stale {
		os.Remove(f)
	}
	if len(stale) > 0 {
		t.log.Info().Int("files", len(stale)).Str("dir", t.cfg.Dir).
			Msg("tls: removed the temporary files of an interrupted write of the session ticket keys")
	}
}

// writeLocked writes the keys whole or not at all (state.WriteAtomic: a temporary file of
// mode 0600, synced and renamed over the file); on failure the old file stays and the write
// is tried again at the next Rotate. t.mu is held.
func (t *TicketKeys) writeLocked() {
	b := encodeTickets(t.keys)
	defer clear(b)
	if err := state.WriteAtomic(t.path, ticketsTempPattern, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}); err != nil {
		t.writes.WithLabelValues("error").Inc()
		t.log.Warn().Err(err).Str("file", t.path).
			Msg("tls: writing the session ticket keys failed: a restart now starts new sessions; trying again in a minute")
		return
	}
	t.writes.WithLabelValues("ok").Inc()
	t.dirty = false
}

func encodeTickets(keys []ticketKey) []byte {
	b := make([]byte, 0, len(ticketsMagic)+2+len(keys)*fileKeySize+sha256.Size)
	b = append(b, ticketsMagic...)
	b = append(b, ticketsFormat, byte(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, uint64(k.created.UnixMilli()))
		b = append(b, k.key[:]...)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// decodeTickets reads a file's bytes; its errors wrap errTicketsForeign or errTicketsDamaged
// and never hold the file's bytes.
func decodeTickets(b []byte) ([]ticketKey, error) {
	head := len(ticketsMagic) + 2
	if len(b) < head {
		if bytes.HasPrefix([]byte(ticketsMagic+"\x01"), b) {
			return nil, errTicketsDamaged
		}
		return nil, errTicketsForeign
	}
	if string(b[:len(ticketsMagic)]) != ticketsMagic || b[len(ticketsMagic)] != ticketsFormat {
		return nil, errTicketsForeign
	}
	n := int(b[len(ticketsMagic)+1])
	if n == 0 || n > maxFileKeys || len(b) != head+n*fileKeySize+sha256.Size {
		return nil, errTicketsDamaged
	}
	body := b[:len(b)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], b[len(body):]) {
		return nil, errTicketsDamaged
	}
	keys := make([]ticketKey, n)
	for i := range keys {
		rec := b[head+i*fileKeySize:]
		keys[i].created = time.UnixMilli(int64(binary.LittleEndian.Uint64(rec)))
		copy(keys[i].key[:], rec[8:fileKeySize])
	}
	slices.SortStableFunc(keys, func(a, b ticketKey) int { return b.created.Compare(a.created) })
	return keys, nil
}
