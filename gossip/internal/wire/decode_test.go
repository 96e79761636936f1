package wire

import (
	"errors"
	"testing"
)

func TestDecodeRejects(t *testing.T) {
	d := NewDecoder()
	bomb := func() []byte { // a valid DEFLATE stream inflating past maxDecoded
		e := NewEncoder("x", 8000, nil)
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
		if _, _, err := d.Decode(p); !errors.Is(err, errBadEvent) {
			t.Errorf("%s: err %v, want errBadEvent", name, err)
		}
	}
}
