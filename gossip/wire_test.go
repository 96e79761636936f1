package gossip

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/homes"
)

var testRegions = []string{"eu", "us", "ap"}

func testHomes(n, nameLen int, origin string, seed uint64) []homes.Home {
	r := rand.New(rand.NewPCG(seed, 1))
	base := uint64(time.Now().UnixMilli()) << 16
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789-"
	out := make([]homes.Home, n)
	for i := range out {
		var b strings.Builder
		for b.Len() < nameLen {
			b.WriteByte(alpha[r.IntN(len(alpha))])
		}
		out[i] = homes.Home{Tenant: fmt.Sprintf("%s-%d", b.String(), i), Region: testRegions[r.IntN(3)],
			Version: homes.Version{HLC: base + uint64(i)*7919, Origin: origin}}
	}
	return out
}

// typicalTenant makes names like real tenants: a word or two and a number.
func typicalHomes(n int, origin string) []homes.Home {
	words := []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka",
		"tyrell", "cyberdyne", "soylent", "aperture", "vandelay", "gringotts", "oscorp", "massive"}
	r := rand.New(rand.NewPCG(7, 7))
	base := uint64(time.Now().UnixMilli()) << 16
	out := make([]homes.Home, n)
	for i := range out {
		t := fmt.Sprintf("%s-%s-%d", words[r.IntN(len(words))], words[r.IntN(len(words))], r.IntN(100000))
		out[i] = homes.Home{Tenant: t, Region: testRegions[r.IntN(3)],
			Version: homes.Version{HLC: base + uint64(i)*uint64(r.IntN(5000)+1), Origin: origin}}
	}
	return out
}

func decodeAll(t *testing.T, events []event) (string, []homes.Mark, []homes.Home) {
	t.Helper()
	d := newDecoder()
	var ms []homes.Mark
	var hs []homes.Home
	var sender string
	for _, ev := range events {
		s, b, err := d.decode(ev.payload)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		sender = s
		for _, w := range b.M {
			ms = append(ms, w.mark(s))
		}
		for _, w := range b.H {
			hs = append(hs, w.home(s))
		}
	}
	return sender, ms, hs
}

// TestSplitWithinLimit pins issue 3 part 2: a batch of many long tenant names is split into
// events each within serf's size limit, and every home comes out, in order.
func TestSplitWithinLimit(t *testing.T) {
	for _, nameLen := range []int{10, 60, 200, 250} {
		t.Run(fmt.Sprint(nameLen), func(t *testing.T) {
			e := newEncoder("entry-a", DefaultEventSizeLimit, nil)
			hs := testHomes(500, nameLen, "entry-a", uint64(nameLen))
			hs[3].Version.Origin = "entry-b" // relayed origin travels too
			events, nm, nh, skipped, err := e.split(nil, hs, 1<<20, false)
			if err != nil || nm != 0 || nh != len(hs) || skipped != 0 {
				t.Fatalf("split: nm %d nh %d skipped %d err %v", nm, nh, skipped, err)
			}
			for i, ev := range events {
				if n := len(ev.payload) + len(EventName) + serfEnvelope; n > DefaultEventSizeLimit {
					t.Fatalf("event %d: %d bytes with serf's envelope, limit %d", i, n, DefaultEventSizeLimit)
				}
			}
			_, _, got := decodeAll(t, events)
			if len(got) != len(hs) {
				t.Fatalf("got %d homes, want %d", len(got), len(hs))
			}
			for i := range hs {
				if got[i] != hs[i] {
					t.Fatalf("home %d: got %+v, want %+v", i, got[i], hs[i])
				}
			}
			t.Logf("tenant names of %d+ bytes: %d events, %.1f homes per event", nameLen, len(events), float64(len(hs))/float64(len(events)))
		})
	}
}

// TestEventSizes reports homes per event for typical names, raw msgpack and DEFLATE.
func TestEventSizes(t *testing.T) {
	hs := typicalHomes(2000, "entry-a")
	e := newEncoder("entry-a", DefaultEventSizeLimit, nil)
	events, _, _, _, err := e.split(nil, hs, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	flated, bytes := 0, 0
	for _, ev := range events {
		if ev.payload[0] == formatFlate {
			flated++
		}
		bytes += len(ev.payload)
	}
	avgName := 0
	for _, h := range hs {
		avgName += len(h.Tenant)
	}
	t.Logf("typical names (avg %d B): %.1f homes/event, %d of %d events deflated, avg payload %d B",
		avgName/len(hs), float64(len(hs))/float64(len(events)), flated, len(events), bytes/len(events))
	for _, n := range []int{1, 2, 5, 10} {
		evs, _, _, _, _ := e.split(nil, hs[:n], 1, false)
		t.Logf("%d homes: payload %d B (format %d)", n, len(evs[0].payload), evs[0].payload[0])
	}
	if per := float64(len(hs)) / float64(len(events)); per < 20 {
		t.Errorf("%.1f homes per event; expected DEFLATE to fit at least 20", per)
	}
}

func TestMarksFirstAndRoundTrip(t *testing.T) {
	now := time.Now()
	ver := homes.Version{HLC: uint64(now.UnixMilli()) << 16, Origin: "entry-a"}
	marks := []homes.Mark{
		{Region: "eu", Observer: "entry-a", At: now.Truncate(time.Millisecond), Version: ver},
		{Region: "us", Observer: "entry-c", At: now.Add(-time.Second).Truncate(time.Millisecond), Version: homes.Version{HLC: ver.HLC + 1, Origin: "entry-c"}},
		{Region: "us", Clear: true, Observer: "entry-a", At: now.Add(time.Second).Truncate(time.Millisecond), Version: homes.Version{HLC: ver.HLC + 2, Origin: "entry-a"}},
	}
	hs := typicalHomes(100, "entry-a")
	e := newEncoder("entry-a", DefaultEventSizeLimit, nil)
	events, nm, nh, _, err := e.split(marks, hs, 1<<20, false)
	if err != nil || nm != 3 || nh != 100 {
		t.Fatalf("split: %d %d %v", nm, nh, err)
	}
	if events[0].marks != 3 {
		t.Fatalf("first event carries %d marks, want all 3 ahead of homes", events[0].marks)
	}
	sender, gotM, gotH := decodeAll(t, events)
	if sender != "entry-a" || len(gotH) != 100 {
		t.Fatalf("sender %q, %d homes", sender, len(gotH))
	}
	for i := range marks {
		if !gotM[i].At.Equal(marks[i].At) {
			t.Errorf("mark %d at %v, want %v", i, gotM[i].At, marks[i].At)
		}
		gotM[i].At, marks[i].At = time.Time{}, time.Time{}
		if gotM[i] != marks[i] {
			t.Errorf("mark %d: got %+v, want %+v", i, gotM[i], marks[i])
		}
	}
}

func TestSplitFullOnly(t *testing.T) {
	e := newEncoder("a", DefaultEventSizeLimit, nil)
	hs := testHomes(5, 20, "a", 1)
	events, _, nh, _, _ := e.split(nil, hs, 4, true)
	if len(events) != 0 || nh != 0 {
		t.Fatalf("fullOnly sent %d events for 5 small homes", len(events))
	}
	hs = testHomes(100, 60, "a", 2)
	events, _, nh, _, _ = e.split(nil, hs, 100, true)
	if len(events) == 0 || nh == len(hs) {
		t.Fatalf("fullOnly: %d events, %d of %d homes: want full events only, a rest left", len(events), nh, len(hs))
	}
}

func TestDecodeRejects(t *testing.T) {
	d := newDecoder()
	bomb := func() []byte { // a valid DEFLATE stream inflating past maxDecoded
		e := newEncoder("x", 8000, nil)
		e.raw.Reset()
		e.raw.Write(make([]byte, maxDecoded+10))
		e.z.Reset()
		e.fw.Reset(&e.z)
		e.fw.Write(e.raw.Bytes())
		e.fw.Close()
		return append([]byte{formatFlate, 1, 'x'}, e.z.Bytes()...)
	}()
	for name, p := range map[string][]byte{
		"empty":         nil,
		"short":         {formatMsgpack},
		"name too long": {formatMsgpack, 10, 'a'},
		"no sender":     {formatMsgpack, 0},
		"bad format":    {9, 1, 'x', 0x80},
		"bad msgpack":   {formatMsgpack, 1, 'x', 0xc1},
		"bad flate":     {formatFlate, 1, 'x', 0xff, 0xff, 0xff},
		"bomb":          bomb,
	} {
		if _, _, err := d.decode(p); !errors.Is(err, errBadEvent) {
			t.Errorf("%s: err %v, want errBadEvent", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	e := newEncoder("entry-a", DefaultEventSizeLimit, nil)
	evs, _, _, _, _ := e.split(nil, typicalHomes(30, "entry-a"), 2, false)
	for _, ev := range evs {
		f.Add(ev.payload)
	}
	d := newDecoder()
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _, _ = d.decode(p) // must not panic
	})
}
