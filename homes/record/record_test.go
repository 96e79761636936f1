package record

import (
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/homes"
)

// A record is written as an array of its fields in order, and read from that or from the
// map an earlier entry wrote (its keys, empty fields left out).
func TestRecordForms(t *testing.T) {
	h := homes.Home{Tenant: "acme", Region: "eu", Version: ver(1<<40, "entry-b")}
	b, err := msgpack.Marshal(HomeOf(h, "entry-a"))
	if err != nil {
		t.Fatal(err)
	}
	var arr []any
	if err := msgpack.Unmarshal(b, &arr); err != nil || len(arr) != 4 || arr[0] != "acme" || arr[3] != "entry-b" {
		t.Fatalf("a home is written as %v (%v), want [acme eu hlc entry-b]", arr, err)
	}
	for _, form := range []any{
		HomeOf(h, "entry-a"),
		map[string]any{"t": "acme", "r": "eu", "v": uint64(1 << 40), "o": "entry-b"},
	} {
		b, _ := msgpack.Marshal(form)
		var r Home
		if err := msgpack.Unmarshal(b, &r); err != nil || r.Home("entry-a") != h {
			t.Errorf("%T: read %+v (%v)", form, r, err)
		}
	}
	m := homes.Mark{Region: "us", Clear: true, Observer: "entry-c", At: time.UnixMilli(1_800_000_000_124), Version: ver(1<<40+10, "entry-a")}
	for _, form := range []any{
		MarkOf(m, "entry-a"),
		map[string]any{"r": "us", "c": true, "b": "entry-c", "w": int64(1_800_000_000_124), "v": uint64(1<<40 + 10)},
	} {
		b, _ := msgpack.Marshal(form)
		var r Mark
		if err := msgpack.Unmarshal(b, &r); err != nil || !reflect.DeepEqual(r.Mark("entry-a"), m) {
			t.Errorf("%T: read %+v (%v)", form, r.Mark("entry-a"), err)
		}
	}
	// The writer's name is left out, and put back by the reader.
	if r := MarkOf(m, "entry-c"); r.B != "" || r.O != "entry-a" || r.Mark("entry-c") != m {
		t.Errorf("written by the observer: %+v", r)
	}
	// Without a time a mark is dated by its version.
	if got := (Mark{R: "us", V: 1 << 40}).Mark("x").At; !got.Equal(homes.Version{HLC: 1 << 40}.Time()) {
		t.Errorf("a mark without a time is dated %v", got)
	}
}
