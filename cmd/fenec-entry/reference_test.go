package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/status"
)

// TestReferenceHasEveryFlagMetricAndField holds docs/REFERENCE.md to the code: every flag
// of serve, every metric any package registers (a "fenec_entry_..." string in the code) and
// every field of /status.json, as a dotted path (regions[].router_states[].url), is written
// in it. A flag, metric or field added without its line in the reference fails here.
func TestReferenceHasEveryFlagMetricAndField(t *testing.T) {
	var flagNames []string
	for _, f := range flags {
		flagNames = append(flagNames, "--"+f.name)
	}
	if missing := testutil.ReferenceMissing(t, flagNames); len(missing) > 0 {
		t.Errorf("%s does not write these flags (in backquotes): %q", testutil.ReferenceFile, missing)
	}

	metrics := testutil.StringLiterals(t, regexp.MustCompile(`fenec_entry_[a-z0-9_]+`))
	if len(metrics) < 50 {
		t.Fatalf("found only %d metric names in the code: the scan is broken", len(metrics))
	}
	if missing := testutil.ReferenceMissing(t, metrics); len(missing) > 0 {
		t.Errorf("%s does not write these metrics (in backquotes): %q", testutil.ReferenceFile, missing)
	}

	fields := jsonPaths(reflect.TypeFor[status.Status](), "")
	if len(fields) < 40 {
		t.Fatalf("found only %d fields of /status.json: the walk is broken", len(fields))
	}
	if missing := testutil.ReferenceMissing(t, fields); len(missing) > 0 {
		t.Errorf("%s does not write these /status.json fields (in backquotes): %q", testutil.ReferenceFile, missing)
	}
}

// jsonPaths returns the JSON paths of t's leaf fields: "a" for a field, "a.b" for a field of
// an object, "a[].b" for a field of an array's objects. Times, maps and arrays of anything
// but objects are leaves.
func jsonPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		path := prefix + tag
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeFor[time.Time]():
			out = append(out, path)
		case ft.Kind() == reflect.Struct:
			out = append(out, jsonPaths(ft, path+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, jsonPaths(ft.Elem(), path+"[].")...)
		default:
			out = append(out, path)
		}
	}
	return out
}
