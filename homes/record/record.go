package record

import (
	"time"

	"github.com/fenec/fenec-entry/homes"
)

// Home is a home's record. The msgpack keys are for decoding the map form of earlier
// entries; it is written as an array.
type Home struct {
	_msgpack struct{} `msgpack:",as_array"` //lint:ignore U1000 msgpack reads its tag
	T        string   `msgpack:"t"`         // tenant
	R        string   `msgpack:"r"`         // region
	V        uint64   `msgpack:"v"`         // the version's hybrid logical clock
	O        string   `msgpack:"o"`         // the version's origin; "" when it is the writer
}

// Mark is a mark's record: a region's failure or its clear.
type Mark struct {
	_msgpack struct{} `msgpack:",as_array"` //lint:ignore U1000 msgpack reads its tag
	R        string   `msgpack:"r"`         // region
	C        bool     `msgpack:"c"`         // a clear, not a failure
	B        string   `msgpack:"b"`         // observer; "" when it is the writer
	W        int64    `msgpack:"w"`         // when, unix milliseconds on the observer's clock; 0: unknown
	V        uint64   `msgpack:"v"`         // the version's hybrid logical clock
	O        string   `msgpack:"o"`         // the version's origin; "" when it is the writer
}

// HomeOf is h's record, written by writer.
func HomeOf(h homes.Home, writer string) Home {
	r := Home{T: h.Tenant, R: h.Region, V: h.Version.HLC}
	if h.Version.Origin != writer {
		r.O = h.Version.Origin
	}
	return r
}

// Home is the home r says, written by writer.
func (r Home) Home(writer string) homes.Home {
	o := r.O
	if o == "" {
		o = writer
	}
	return homes.Home{Tenant: r.T, Region: r.R, Version: homes.Version{HLC: r.V, Origin: o}}
}

// MarkOf is m's record, written by writer. Its time keeps milliseconds (Normal).
func MarkOf(m homes.Mark, writer string) Mark {
	r := Mark{R: m.Region, C: m.Clear, V: m.Version.HLC}
	if m.Observer != writer {
		r.B = m.Observer
	}
	if m.Version.Origin != writer {
		r.O = m.Version.Origin
	}
	if !m.At.IsZero() {
		r.W = m.At.UnixMilli()
	}
	return r
}

// Mark is the mark r says, written by writer. Without a time it is dated by its version.
func (r Mark) Mark(writer string) homes.Mark {
	m := homes.Mark{Region: r.R, Clear: r.C, Observer: r.B, Version: homes.Version{HLC: r.V, Origin: r.O}}
	if m.Observer == "" {
		m.Observer = writer
	}
	if m.Version.Origin == "" {
		m.Version.Origin = writer
	}
	if r.W != 0 {
		m.At = time.UnixMilli(r.W)
	} else {
		m.At = m.Version.Time()
	}
	return m
}

// Normal is m as a reader of its record sees it: its time to the millisecond (a mark
// without one dated by its version).
func Normal(m homes.Mark) homes.Mark {
	return MarkOf(m, "").Mark("")
}
