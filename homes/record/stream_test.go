package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/homes"
)

func ver(hlc uint64, origin string) homes.Version { return homes.Version{HLC: hlc, Origin: origin} }

// readAll reads a whole stream, failing the test on an error.
func readAll(t *testing.T, b []byte, mac *MAC) []Rec {
	t.Helper()
	r := NewReader(bytes.NewReader(b), mac, 1000)
	var out []Rec
	for {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		out = append(out, rec)
		if rec.Last {
			return out
		}
	}
}

// testdata/v1-stream.hex was written by the entry before version 2 (d8c11e5's writer): a
// version 1 stream reads as it did, and a version 1 writer writes it to the byte, so an
// entry that reads only version 1 reads what this one writes for it.
func TestVersion1AsOlderEntriesWroteIt(t *testing.T) {
	b, err := os.ReadFile("testdata/v1-stream.hex")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	newMAC := func() *MAC { return NewMAC([]byte("golden-key"), "nonce", "/_gossip/snapshot") }
	hs := []homes.Home{{Tenant: "acme", Region: "eu", Version: ver(1<<40, "entry-a")},
		{Tenant: "globex", Region: "us", Version: ver(1<<40+7, "entry-b")}}
	mk := homes.Mark{Region: "ap", Observer: "entry-c", At: time.Unix(0, 1_800_000_000_123_456_789), Version: ver(1<<40+9, "entry-c")}

	recs := readAll(t, golden, newMAC())
	if len(recs) != 5 || recs[0].Version != 1 || recs[0].Node != "entry-a" || recs[1].Home != hs[0] ||
		recs[2].Home != hs[1] || !reflect.DeepEqual(recs[3].Mark, mk) || recs[4].Kind != KindTrailer {
		t.Fatalf("read %+v", recs)
	}

	var buf bytes.Buffer
	w := NewWriter(&buf, newMAC(), OldestVersion, nil)
	if err := errors.Join(w.Header("entry-a", 2, 1), w.Home(hs[0]), w.OwnHome(hs[1]), w.Mark(mk), w.Trailer()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), golden) {
		t.Errorf("version 1 written:\n%x\nwant\n%x", buf.Bytes(), golden)
	}
}

// Version 2 carries every kind and reads back what was written: the writer's own name left
// out of its records and put back, a mark's time to the millisecond, a mark without one
// dated by its version, own homes told apart, the digest whole.
func TestVersion2RoundTrip(t *testing.T) {
	hs := []homes.Home{{Tenant: "acme", Region: "eu", Version: ver(1<<40, "entry-a")},
		{Tenant: "globex", Region: "us", Version: ver(1<<40+7, "entry-b")}}
	ms := []homes.Mark{
		{Region: "ap", Observer: "entry-c", At: time.Unix(0, 1_800_000_000_123_456_789), Version: ver(1<<40+9, "entry-c")},
		{Region: "eu", Clear: true, Observer: "entry-a", Version: ver(1<<40+11, "entry-a")},
	}
	d := &Digest{Marks: 42}
	for i := range d.Buckets {
		d.Buckets[i] = uint64(i) * 7
	}
	var buf bytes.Buffer
	mac := func() *MAC { return NewMAC([]byte("k"), "n", "/p") }
	w := NewWriter(&buf, mac(), Version, nil)
	if err := errors.Join(w.Header("entry-a", 2, 2), w.Home(hs[0]), w.OwnHome(hs[1]), w.Mark(ms[0]), w.Mark(ms[1]),
		w.Digest(d), w.Trailer()); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes()[20:], []byte("entry-a")) {
		t.Error("the writer's name is written out past the header")
	}
	recs := readAll(t, buf.Bytes(), mac())
	kinds := []int{KindHeader, KindHome, KindOwnHome, KindMark, KindMark, KindDigest, KindTrailer}
	for i, k := range kinds {
		if recs[i].Kind != k {
			t.Fatalf("record %d is kind %d, want %d (%+v)", i, recs[i].Kind, k, recs)
		}
	}
	if recs[0].Version != Version || recs[1].Home != hs[0] || recs[2].Home != hs[1] || *recs[5].Digest != *d {
		t.Errorf("read %+v", recs)
	}
	for i, want := range []homes.Mark{
		{Region: "ap", Observer: "entry-c", At: time.UnixMilli(1_800_000_000_123), Version: ver(1<<40+9, "entry-c")},
		{Region: "eu", Clear: true, Observer: "entry-a", At: ms[1].Version.Time(), Version: ver(1<<40+11, "entry-a")},
	} {
		if got := recs[3+i].Mark; !reflect.DeepEqual(got, want) || !reflect.DeepEqual(Normal(ms[i]), want) {
			t.Errorf("mark %d read %+v, Normal %+v; want %+v", i, got, Normal(ms[i]), want)
		}
	}
}

// A stream is flushed every FlushEvery sealed blocks and at its end.
func TestStreamFlushesEveryFourBlocks(t *testing.T) {
	var buf bytes.Buffer
	flushes := 0
	sw := NewWriter(&buf, NewMAC([]byte("k"), "n", "/p"), Version, func() error { flushes++; return nil })
	if err := sw.Header("a", 0, 0); err != nil {
		t.Fatal(err)
	}
	const n = 2*4*SealEvery + 10
	for i := range n {
		if err := sw.Home(homes.Home{Tenant: fmt.Sprintf("t%d", i), Region: "eu", Version: homes.Version{HLC: 1, Origin: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if flushes != 2 {
		t.Errorf("%d flushes after %d homes, want 2", flushes, n)
	}
	if err := sw.Trailer(); err != nil || flushes != 3 {
		t.Errorf("trailer: %v, %d flushes; want 3", err, flushes)
	}
	sr := NewReader(&buf, NewMAC([]byte("k"), "n", "/p"), n)
	seals := 0
	for {
		rec, err := sr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == KindSeal {
			seals++
		}
		if rec.Last {
			break
		}
	}
	if seals != n/SealEvery {
		t.Errorf("%d seals, want %d: a block is still %d records", seals, n/SealEvery, SealEvery)
	}
}

// What a reader refuses, row by row: each ends the stream with its error, and what was
// yielded before it is whole sealed blocks only.
func TestReaderRefuses(t *testing.T) {
	mac := func() *MAC { return NewMAC([]byte("k"), "n", "/p") }
	stream := func(version, homesN int) []byte {
		var buf bytes.Buffer
		w := NewWriter(&buf, mac(), version, nil)
		w.Header("a", homesN, 0)
		for i := range homesN {
			w.Home(homes.Home{Tenant: fmt.Sprintf("tenant-%04d", i), Region: "eu", Version: ver(uint64(i+1), "b")})
		}
		w.Trailer()
		return buf.Bytes()
	}
	raw := func(vals ...any) []byte {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		for _, v := range vals {
			if err := e.Encode(v); err != nil {
				t.Fatal(err)
			}
		}
		return buf.Bytes()
	}
	good := stream(Version, 300)
	altered := bytes.Clone(good)
	i := bytes.Index(altered, []byte("tenant-0100"))
	altered[i+1] ^= 0x20
	for _, row := range []struct {
		name       string
		b          []byte
		key        string
		maxRecords int
		want       error
	}{
		{"empty", nil, "k", 1000, ErrTruncated},
		{"cut in the middle", good[:len(good)/2], "k", 1000, ErrTruncated},
		{"last byte missing", good[:len(good)-1], "k", 1000, ErrTruncated},
		{"another key", good, "other", 1000, ErrBadSeal},
		{"a tenant altered", altered, "k", 1000, ErrBadSeal},
		{"over the record bound", good, "k", 100, ErrTooLarge},
		{"first record not a header", raw([]any{KindSeal, []byte{1}}), "k", 1000, ErrBadStream},
		{"an unknown version", raw([]any{KindHeader, 3, "a", 0, 0}), "k", 1000, ErrBadStream},
		{"version 0", raw([]any{KindHeader, 0, "a", 0, 0}), "k", 1000, ErrBadStream},
		{"a second header", append(raw([]any{KindHeader, 2, "a", 0, 0}), raw([]any{KindHeader, 2, "a", 0, 0})...), "k", 1000, ErrBadStream},
		{"an unknown kind", append(raw([]any{KindHeader, 2, "a", 0, 0}), raw([]any{9, 1})...), "k", 1000, ErrBadStream},
		{"a version 1 home in version 2", append(raw([]any{KindHeader, 2, "a", 0, 0}), raw([]any{KindHome, "t", "eu", 1, "a"})...), "k", 1000, ErrBadStream},
		{"a home of three fields", append(raw([]any{KindHeader, 2, "a", 0, 0}), raw([]any{KindHome, []any{"t", "eu", 1}})...), "k", 1000, ErrBadStream},
		{"an own home in version 1", append(raw([]any{KindHeader, 1, "a", 0, 0}), raw([]any{KindOwnHome, []any{"t", "eu", 1, ""}})...), "k", 1000, ErrBadStream},
		{"a string too long", append(raw([]any{KindHeader, 2, "a", 0, 0}), raw([]any{KindHome, []any{strings.Repeat("x", MaxString+1), "eu", 1, ""}})...), "k", 1000, ErrBadStream},
		{"a digest of 3 buckets", append(raw([]any{KindHeader, 2, "a", 0, 0}), raw([]any{KindDigest, []uint64{1, 2, 3}, 0})...), "k", 1000, ErrBadStream},
	} {
		t.Run(row.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(row.b), NewMAC([]byte(row.key), "n", "/p"), row.maxRecords)
			yielded, held := 0, 0
			for {
				rec, err := r.Next()
				if err != nil {
					if !errors.Is(err, row.want) {
						t.Fatalf("%v, want %v", err, row.want)
					}
					break
				}
				switch {
				case rec.Kind == KindHome:
					held++
				case rec.Sealed:
					yielded, held = yielded+held, 0
				}
				if rec.Last {
					t.Fatal("read to the trailer")
				}
			}
			if yielded%SealEvery != 0 {
				t.Errorf("%d homes sealed before the error: not whole blocks", yielded)
			}
		})
	}
	// Both versions read whole, as written.
	for _, v := range []int{OldestVersion, Version} {
		if recs := readAll(t, stream(v, 300), mac()); len(recs) != 300+2+300/SealEvery {
			t.Errorf("version %d: %d records", v, len(recs))
		}
	}
}

// Whatever the bytes, a reader ends with a record or an error: no panic, no hang, and no
// more records than its bound.
func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf, NewMAC([]byte("k"), "", ""), Version, nil)
	w.Header("a", 1, 1)
	w.Home(homes.Home{Tenant: "t", Region: "eu", Version: ver(1, "a")})
	w.Mark(homes.Mark{Region: "eu", Observer: "b", At: time.UnixMilli(5), Version: ver(2, "b")})
	w.Trailer()
	f.Add(buf.Bytes())
	b, _ := os.ReadFile("testdata/v1-stream.hex")
	if g, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil {
		f.Add(g)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), NewMAC([]byte("k"), "", ""), 50)
		for n := 0; ; n++ {
			rec, err := r.Next()
			if err != nil || rec.Last {
				return
			}
			if n > len(b) {
				t.Fatalf("%d records from %d bytes", n, len(b))
			}
		}
	})
}
