package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The files an operator loads into Prometheus and Grafana (deploy/README.md). They name the
// entry's metrics by hand, so a renamed or misspelt metric would leave an alert that never
// fires, or an empty graph, without a word.
var deployMetricFiles = []string{
	"deploy/prometheus/fenec-entry.rules.yml",
	"deploy/prometheus/fenec-entry.rules.test.yml",
	"deploy/grafana/fenec-entry.json",
}

var metricName = regexp.MustCompile(`fenec_entry_[a-z0-9_]+`)

// referenceMetrics returns the metric names docs/REFERENCE.md's "Metrics" section lists: the
// backquoted names in the first cell of its tables' rows.
func referenceMetrics(t *testing.T) map[string]bool {
	t.Helper()
	doc := readRoot(t, testutil.ReferenceFile)
	_, sec, ok := strings.Cut(doc, "\n## Metrics\n")
	if !ok {
		t.Fatalf("%s: no \"## Metrics\" section", testutil.ReferenceFile)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	names := map[string]bool{}
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`(fenec_entry_[a-z0-9_]+)`").FindAllStringSubmatch(first, -1) {
			names[m[1]] = true
		}
	}
	if len(names) < 50 {
		t.Fatalf("%s: found only %d metrics in \"## Metrics\": the parse is broken", testutil.ReferenceFile, len(names))
	}
	return names
}

func readRoot(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unknownMetrics returns, as "line N: name", every fenec_entry_* name in text that the
// reference does not list. A histogram's series (_bucket, _sum, _count) count as their
// histogram's name.
func unknownMetrics(text string, known map[string]bool) []string {
	var out []string
	for n, line := range strings.Split(text, "\n") {
		for _, name := range metricName.FindAllString(line, -1) {
			if known[name] {
				continue
			}
			base := name
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, s)
			}
			if base != name && known[base] {
				continue
			}
			out = append(out, "line "+strconv.Itoa(n+1)+": "+name)
		}
	}
	return out
}

// TestReferenceListsDeployMetrics: every metric name the alert rules, their tests and the
// dashboard use is one docs/REFERENCE.md lists.
func TestReferenceListsDeployMetrics(t *testing.T) {
	known := referenceMetrics(t)
	for _, f := range deployMetricFiles {
		text := readRoot(t, f)
		if len(metricName.FindAllString(text, -1)) < 10 {
			t.Errorf("%s: fewer than 10 metric names: the scan is broken", f)
		}
		for _, u := range unknownMetrics(text, known) {
			t.Errorf("%s: %s is not a metric %s lists (misspelt, or renamed?)", f, u, testutil.ReferenceFile)
		}
	}
	// The check itself: a misspelt name is caught, a histogram's series are not.
	if got := unknownMetrics("rate(fenec_entry_request_total[5m]) fenec_entry_upstream_seconds_bucket", known); !slices.Equal(got, []string{"line 1: fenec_entry_request_total"}) {
		t.Errorf("unknownMetrics on a misspelt name = %q", got)
	}
}

// TestOperationsAlertsAreTheRules: docs/OPERATIONS.md "What to alert on" and the rules file
// say the same: one alert a row, in the row's order, named in its first cell, and the alert's
// expression uses every metric of the row's metric cell.
func TestOperationsAlertsAreTheRules(t *testing.T) {
	const ops = "docs/OPERATIONS.md"
	doc := readRoot(t, ops)
	_, sec, ok := strings.Cut(doc, "\n## What to alert on\n")
	if !ok {
		t.Fatalf("%s: no \"## What to alert on\" section", ops)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	type row struct {
		alert   string
		metrics []string
	}
	var rows []row
	cellAlert := regexp.MustCompile("^ *`(FenecEntry[A-Za-z]+)` *$")
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `FenecEntry") {
			continue
		}
		cells := strings.Split(line, "|")
		m := cellAlert.FindStringSubmatch(cells[1])
		if m == nil || len(cells) < 5 {
			t.Errorf("%s: a row not as | `Alert` | alert when | metric | what it means |: %s", ops, line)
			continue
		}
		rows = append(rows, row{m[1], metricName.FindAllString(cells[3], -1)})
	}

	rules := readRoot(t, "deploy/prometheus/fenec-entry.rules.yml")
	var alerts []string
	exprs := map[string]string{}
	alertLine := regexp.MustCompile(`^ *- alert: (\w+)$`)
	var cur string
	inExpr := false
	for _, line := range strings.Split(rules, "\n") {
		if m := alertLine.FindStringSubmatch(line); m != nil {
			cur, inExpr = m[1], false
			alerts = append(alerts, cur)
			continue
		}
		key := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(key, "expr:"):
			inExpr = true
			exprs[cur] += strings.TrimPrefix(key, "expr:")
		case strings.HasPrefix(key, "for:"), strings.HasPrefix(key, "labels:"), strings.HasPrefix(key, "annotations:"):
			inExpr = false
		case inExpr:
			exprs[cur] += " " + key
		}
	}
	if len(rows) < 10 || len(alerts) < 10 {
		t.Fatalf("%d rows in %s, %d alerts in the rules: a parse is broken", len(rows), ops, len(alerts))
	}
	var rowAlerts []string
	for _, r := range rows {
		rowAlerts = append(rowAlerts, r.alert)
		for _, m := range r.metrics {
			if e, ok := exprs[r.alert]; ok && !metricIn(e, m) {
				t.Errorf("%s: the row of %s names %s, which its expression does not use: %s", ops, r.alert, m, e)
			}
		}
	}
	if !slices.Equal(rowAlerts, alerts) {
		t.Errorf("%s \"What to alert on\" rows name the alerts\n  %q\nthe rules file has\n  %q", ops, rowAlerts, alerts)
	}
}

func metricIn(expr, name string) bool {
	return slices.Contains(metricName.FindAllString(expr, -1), name)
}
