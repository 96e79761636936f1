package gossip

import (
	"reflect"
	"testing"
)

func TestRejoined(t *testing.T) {
	pa, pb := Peer{Name: "a"}, Peer{Name: "b"}
	rows := []struct {
		name   string
		known  map[string]bool
		now    []Peer
		paused bool
		want   []Peer
	}{
		{"first look", nil, []Peer{pa}, false, nil},
		{"no one new", map[string]bool{"a": true}, []Peer{pa}, false, nil},
		{"b came alive", map[string]bool{"a": true}, []Peer{pa, pb}, false, []Peer{pb}},
		{"b came back after the first look saw none", map[string]bool{}, []Peer{pb}, false, []Peer{pb}},
		{"b came alive while this entry bootstraps", map[string]bool{"a": true}, []Peer{pa, pb}, true, nil},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			alive, back := rejoined(r.known, r.now, r.paused)
			if !reflect.DeepEqual(back, r.want) {
				t.Errorf("repair with %v, want %v", back, r.want)
			}
			if len(alive) != len(r.now) {
				t.Errorf("alive %v, want %v", alive, r.now)
			}
		})
	}
	// Once a bootstrap ends, the peers that came meanwhile are known: no repair with them.
	alive, _ := rejoined(map[string]bool{"a": true}, []Peer{pa, pb}, true)
	if _, back := rejoined(alive, []Peer{pa, pb}, false); back != nil {
		t.Errorf("after the bootstrap: repair with %v, want none", back)
	}
}
