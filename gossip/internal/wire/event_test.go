package wire_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// typicalHomes makes names like real tenants: a word or two and a number.
func typicalHomes(n int, origin string) []homes.Home {
	words := []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka",
		"tyrell", "cyberdyne", "soylent", "aperture", "vandelay", "gringotts", "oscorp", "massive"}
	r := rand.New(rand.NewPCG(7, 7))
	base := uint64(time.Now().UnixMilli()) << 16
	out := make([]homes.Home, n)
	for i := range out {
		t := fmt.Sprintf("%s-%s-%d", words[r.IntN(len(words))], words[r.IntN(len(words))], r.IntN(100000))
		out[i] = homes.Home{Tenant: t, Region: gossiptest.Regions[r.IntN(3)],
			Version: homes.Version{HLC: base + uint64(i)*uint64(r.IntN(5000)+1), Origin: origin}}
	}
	return out
}

// TestSplitWithinLimit: a batch of many long tenant names is split into
// events each within serf's size limit, and every home comes out, in order.
func TestSplitWithinLimit(t *testing.T) {
	for _, nameLen := range []int{10, 60, 200, 250} {
		t.Run(fmt.Sprint(nameLen), func(t *testing.T) {
			e := wire.NewEncoder("entry-a", wire.DefaultEventSizeLimit, nil)
			hs := gossiptest.Homes(500, nameLen, "entry-a", uint64(nameLen))
			hs[3].Version.Origin = "entry-b" // relayed origin travels too
			events, nm, nh, skipped, err := e.Split(nil, hs, 1<<20, false)
			if err != nil || nm != 0 || nh != len(hs) || skipped != 0 {
				t.Fatalf("split: nm %d nh %d skipped %d err %v", nm, nh, skipped, err)
			}
			for i, ev := range events {
				if n := len(ev.Payload) + len(wire.EventName) + wire.SerfEnvelope; n > wire.DefaultEventSizeLimit {
					t.Fatalf("event %d: %d bytes with serf's envelope, limit %d", i, n, wire.DefaultEventSizeLimit)
				}
			}
			_, _, got := gossiptest.Decode(t, payloads(events)...)
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
	e := wire.NewEncoder("entry-a", wire.DefaultEventSizeLimit, nil)
	events, _, _, _, err := e.Split(nil, hs, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	flated, bytes := 0, 0
	for _, ev := range events {
		if ev.Payload[0] == wire.FormatFlate {
			flated++
		}
		bytes += len(ev.Payload)
	}
	avgName := 0
	for _, h := range hs {
		avgName += len(h.Tenant)
	}
	t.Logf("typical names (avg %d B): %.1f homes/event, %d of %d events deflated, avg payload %d B",
		avgName/len(hs), float64(len(hs))/float64(len(events)), flated, len(events), bytes/len(events))
	for _, n := range []int{1, 2, 5, 10} {
		evs, _, _, _, _ := e.Split(nil, hs[:n], 1, false)
		t.Logf("%d homes: payload %d B (format %d)", n, len(evs[0].Payload), evs[0].Payload[0])
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
	e := wire.NewEncoder("entry-a", wire.DefaultEventSizeLimit, nil)
	events, nm, nh, _, err := e.Split(marks, hs, 1<<20, false)
	if err != nil || nm != 3 || nh != 100 {
		t.Fatalf("split: %d %d %v", nm, nh, err)
	}
	if events[0].Marks != 3 {
		t.Fatalf("first event carries %d marks, want all 3 ahead of homes", events[0].Marks)
	}
	sender, gotM, gotH := gossiptest.Decode(t, payloads(events)...)
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
	e := wire.NewEncoder("a", wire.DefaultEventSizeLimit, nil)
	hs := gossiptest.Homes(5, 20, "a", 1)
	events, _, nh, _, _ := e.Split(nil, hs, 4, true)
	if len(events) != 0 || nh != 0 {
		t.Fatalf("fullOnly sent %d events for 5 small homes", len(events))
	}
	hs = gossiptest.Homes(100, 60, "a", 2)
	events, _, nh, _, _ = e.Split(nil, hs, 100, true)
	if len(events) == 0 || nh == len(hs) {
		t.Fatalf("fullOnly: %d events, %d of %d homes: want full events only, a rest left", len(events), nh, len(hs))
	}
}

func FuzzDecode(f *testing.F) {
	e := wire.NewEncoder("entry-a", wire.DefaultEventSizeLimit, nil)
	evs, _, _, _, _ := e.Split(nil, typicalHomes(30, "entry-a"), 2, false)
	for _, ev := range evs {
		f.Add(ev.Payload)
	}
	d := wire.NewDecoder()
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _, _ = d.Decode(p) // must not panic
	})
}

// payloads are the events' payloads, in order.
func payloads(events []wire.Event) [][]byte {
	out := make([][]byte, len(events))
	for i, ev := range events {
		out[i] = ev.Payload
	}
	return out
}
