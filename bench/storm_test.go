//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// connhold -load's line: 2xx answered, other statuses as non-2xx, and the note says what it saw.
func TestLoadRec(t *testing.T) {
	var l loadResult
	if err := json.Unmarshal([]byte(`{"answered_by_status":{"200":10,"502":2},"lost_by_kind":{"eof":1},"dial_failed_by_kind":{"refused":3},"closed_idle":4,"lost_on_reused":1,"connections":7}`), &l); err != nil {
		t.Fatal(err)
	}
	if r := loadRec(&l); r.OK != 10 || r.Non["502"] != 2 || r.Lost["eof"] != 1 || r.NotConn["refused"] != 3 || r.ClosedIdle != 4 ||
		r.Note != "7 connections, 4 seen closed while idle (dialed again), 1 of the lost on a kept-alive connection" {
		t.Errorf("loadRec = %+v", r)
	}
}

// The table sums row 1's rounds into one line; rows 1-6 fail on LOST only, row 7 on every
// failure (non-2xx, not connected, connections seen closed while idle).
func TestStormTable(t *testing.T) {
	m := func(kv ...any) map[string]int64 {
		out := map[string]int64{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = int64(kv[i+1].(int))
		}
		return out
	}
	recs := []stormRec{
		{Row: 1, Title: "1 new", Target: "nginx", Requests: 100, OK: 100, NotConn: m("connect", 2)},
		{Row: 1, Title: "1 new", Target: "nginx", Requests: 50, OK: 49, Lost: m("read", 1)},
		{Row: 6, Title: "6 stop", Target: "fenec-entry", Requests: 10, OK: 9, Non: m("502", 1), NotConn: m("refused", 5), Note: "SIGTERM"},
		{Row: 7, Title: "7 upgrade", Target: "nginx", Requests: 20, OK: 20, ClosedIdle: 3},
		{Row: 7, Title: "7 upgrade", Target: "fenec-entry", Requests: 20, OK: 20},
	}
	got := stormTable(recs, 30)
	for _, want := range []string{
		"| 1 new | nginx | 150 | 149 | 0 | 1 (read 1) | 2 (connect 2) | **LOST 1** | 2 rounds of 30 s |",
		"| 6 stop | fenec-entry | 10 | 9 | 1 (502 1) | 0 | 5 (refused 5) | none lost | SIGTERM |",
		"| 7 upgrade | nginx | 20 | 20 | 0 | 0 | 0 | **FAILED 3** |",
		"| 7 upgrade | fenec-entry | 20 | 20 | 0 | 0 | 0 | no failure |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}
