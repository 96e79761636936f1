package state

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// FuzzDecode: no input makes the reader panic or hang, and whatever it accepts it gives
// back the same when written again.
func FuzzDecode(f *testing.F) {
	good := goodFile(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:len(magic)+1])
	f.Add([]byte(magic + "\x02\x00"))
	f.Add([]byte("not a state file"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs []fileHome
		h, n, err := decode(bytes.NewReader(data), func(r *fileHome) error {
			recs = append(recs, *r)
			return nil
		})
		if err != nil {
			return
		}
		if n != uint64(len(recs)) {
			t.Fatalf("decode counted %d records, gave %d", n, len(recs))
		}
		var buf bytes.Buffer
		h.Written = time.UnixMilli(h.Written.UnixMilli())
		enc, err := newEncoder(&buf, h, len(recs))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if ok, err := enc.home(r.Home, r.Source); err != nil || !ok {
				t.Fatalf("a decoded record does not encode: %+v: %v", r, err)
			}
		}
		if err := enc.close(); err != nil {
			t.Fatal(err)
		}
		var again []fileHome
		h2, _, err := decode(&buf, func(r *fileHome) error { again = append(again, *r); return nil })
		if err != nil {
			t.Fatalf("a re-encoded file does not decode: %v", err)
		}
		if fmt.Sprint(h2, again) != fmt.Sprint(h, recs) {
			t.Fatalf("round trip changed the file:\n%v %v\n%v %v", h, recs, h2, again)
		}
	})
}
