package wire

import (
	"bytes"
	"compress/flate"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/homes"
)

// The testdata files were written by the entry before records became arrays (d8c11e5's
// encoder): the payloads an older entry sends, and its DEFLATE dictionary.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ver(hlc uint64, origin string) homes.Version { return homes.Version{HLC: hlc, Origin: origin} }

// An older entry's events (records as maps) decode: a small one, as msgpack, and a larger
// one, DEFLATEd with the shared dictionary, which must be the older entry's to the byte.
func TestDecodesOlderEntrysEvents(t *testing.T) {
	if got, want := flateDict, golden(t, "v1-dict.hex"); !bytes.Equal(got, want) {
		t.Fatalf("the DEFLATE dictionary changed:\n got %x\nwant %x", got, want)
	}
	d := NewDecoder()
	sender, b, err := d.Decode(golden(t, "v1-event-marks-homes.hex"))
	if err != nil {
		t.Fatal(err)
	}
	if sender != "entry-a" || b.S != 1_800_000_000_500 || len(b.M) != 2 || len(b.H) != 2 {
		t.Fatalf("sender %q, batch %+v", sender, b)
	}
	wantM := []homes.Mark{
		{Region: "ap", Observer: "entry-a", At: time.UnixMilli(1_800_000_000_123), Version: ver(1<<40+9, "entry-a")},
		{Region: "us", Clear: true, Observer: "entry-c", At: time.UnixMilli(1_800_000_000_124), Version: ver(1<<40+10, "entry-c")},
	}
	for i, w := range b.M {
		if got := w.Mark(sender); !reflect.DeepEqual(got, wantM[i]) {
			t.Errorf("mark %d: %+v, want %+v", i, got, wantM[i])
		}
	}
	wantH := []homes.Home{{Tenant: "acme", Region: "eu", Version: ver(1<<40, "entry-a")},
		{Tenant: "globex", Region: "us", Version: ver(1<<40+7, "entry-b")}}
	for i, w := range b.H {
		if got := w.Home(sender); got != wantH[i] {
			t.Errorf("home %d: %+v, want %+v", i, got, wantH[i])
		}
	}
	p := golden(t, "v1-event-flate.hex")
	if p[0] != formatFlate {
		t.Fatalf("the larger golden event is format %d, want DEFLATE", p[0])
	}
	_, b, err = d.Decode(p)
	if err != nil || len(b.H) != 40 || b.H[39].Home("entry-a") != (homes.Home{Tenant: "tenant-39", Region: "eu", Version: ver(1<<40+39, "entry-a")}) {
		t.Fatalf("DEFLATEd older event: %v, %d homes", err, len(b.H))
	}
}

// What this entry sends, an older entry reads: its records (maps by key, or arrays field by
// field, as msgpack decodes a struct) and its dictionary are these types and bytes.
func TestOlderEntryDecodesThisEntrysEvents(t *testing.T) {
	type oldHome struct {
		T string `msgpack:"t"`
		R string `msgpack:"r"`
		V uint64 `msgpack:"v"`
		O string `msgpack:"o,omitempty"`
	}
	type oldMark struct {
		R string `msgpack:"r"`
		C bool   `msgpack:"c,omitempty"`
		B string `msgpack:"b,omitempty"`
		W int64  `msgpack:"w,omitempty"`
		V uint64 `msgpack:"v"`
		O string `msgpack:"o,omitempty"`
	}
	type oldBatch struct {
		M []oldMark `msgpack:"m,omitempty"`
		H []oldHome `msgpack:"h,omitempty"`
		S int64     `msgpack:"s,omitempty"`
	}
	oldDecode := func(p []byte) (oldBatch, error) {
		var b oldBatch
		body := p[2+int(p[1]):]
		if p[0] == formatFlate {
			fr := flate.NewReaderDict(bytes.NewReader(body), golden(t, "v1-dict.hex"))
			var err error
			if body, err = io.ReadAll(fr); err != nil {
				return b, err
			}
		}
		return b, msgpack.Unmarshal(body, &b)
	}
	e := NewEncoder("entry-a", DefaultEventSizeLimit, func() time.Time { return time.UnixMilli(1_800_000_000_500) })
	ms := []homes.Mark{{Region: "us", Clear: true, Observer: "entry-c", At: time.UnixMilli(1_800_000_000_124), Version: ver(1<<40+10, "entry-c")}}
	for _, n := range []int{1, 40} { // one as msgpack, many DEFLATEd
		var hs []homes.Home
		for k := range n {
			hs = append(hs, homes.Home{Tenant: fmt.Sprintf("tenant-%d", k), Region: "eu", Version: ver(1<<40+uint64(k), "entry-a")})
		}
		p, err := e.Encode(ms, hs)
		if err != nil {
			t.Fatal(err)
		}
		b, err := oldDecode(p)
		if err != nil {
			t.Fatalf("%d homes, format %d: an older entry cannot decode it: %v", n, p[0], err)
		}
		if len(b.H) != n || b.H[n-1] != (oldHome{T: fmt.Sprintf("tenant-%d", n-1), R: "eu", V: 1<<40 + uint64(n-1)}) ||
			len(b.M) != 1 || b.M[0] != (oldMark{R: "us", C: true, B: "entry-c", W: 1_800_000_000_124, V: 1<<40 + 10, O: "entry-c"}) ||
			b.S != 1_800_000_000_500 {
			t.Errorf("%d homes: an older entry read %+v", n, b)
		}
	}
}
