package main

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseRouters(t *testing.T) {
	got, err := parseRouters(" eu=http://r1:7000, http://r2:7000/ ; us=https://r3:7443 ")
	if err != nil {
		t.Fatal(err)
	}
	var names, urls []string
	for _, r := range got {
		names = append(names, r.Name)
		for _, u := range r.Routers {
			urls = append(urls, r.Name+" "+u.String())
		}
	}
	if want := []string{"eu", "us"}; !reflect.DeepEqual(names, want) {
		t.Errorf("regions = %v, want %v (the order is the fallback order)", names, want)
	}
	if want := []string{"eu http://r1:7000", "eu http://r2:7000", "us https://r3:7443"}; !reflect.DeepEqual(urls, want) {
		t.Errorf("routers = %v, want %v", urls, want)
	}
}

func TestParseRoutersErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "no regions"},
		{" ; ", "an empty region"},
		{"http://r1:7000", "names no region"},
		{"=http://r1:7000", "has no name"},
		{"eu=", `region "eu" has no routers (want eu=http://host:port,...;us=...)`},
		{"eu=http://r1:7000;us= ", `region "us" has no routers`},
		{"eu=http://r1:7000,", `region "eu": an empty router: a "," with nothing after it`},
		{"eu=http://r1:7000,,http://r2:7000", `region "eu": an empty router`},
		{"eu=http://r1:7000;us= , ", `region "us": an empty router`},
		{"eu=http://r1:7000;", `an empty region: a ";" with nothing after it`},
		{"eu=http://r1:7000;;us=http://r3:7000", "an empty region"},
		{"eu=http://r1:7000\x7f", "is not a URL"},
	}
	for _, tt := range tests {
		_, err := parseRouters(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseRouters(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestParseRoutersHidesPasswords(t *testing.T) {
	for _, in := range []string{"http://user:hunter2@r1:7000", "eu=http://user:hunter2@r1:7000\x7f", "user:hunter2@r1:7000"} {
		_, err := parseRouters(in)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("parseRouters(%q) = %v, want an error without the password", in, err)
		}
	}
}

func TestParseContinents(t *testing.T) {
	got, err := parseContinents("eu=eu, NA=us ,")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"EU": "eu", "NA": "us"}; !reflect.DeepEqual(got, want) {
		t.Errorf("parseContinents = %v, want %v", got, want)
	}
	empty, err := parseContinents("")
	if err != nil || empty == nil || len(empty) != 0 {
		t.Errorf(`parseContinents("") = %v, %v; want an empty non-nil map`, empty, err)
	}
	for _, in := range []string{"EU", "EU=", "=eu", "EU=eu,EU=us"} {
		if _, err := parseContinents(in); err == nil {
			t.Errorf("parseContinents(%q) = nil error", in)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1MiB", 1 << 20},
		{"512KiB", 512 << 10},
		{"1048576", 1048576},
		{"2MB", 2_000_000},
		{"2 mb", 2_000_000},
		{"1GiB", 1 << 30},
		{"10B", 10},
		{"3kb", 3000},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5MiB", "1TiB", "1 M", "99999999999999999999", "9999999999999GiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := parseCIDRs(" 10.1.2.3/8, fd00::/8,192.0.2.7 ,::1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("::1/128"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseCIDRs = %v, want %v", got, want)
	}
	if got, err := parseCIDRs(""); got != nil || err != nil {
		t.Errorf(`parseCIDRs("") = %v, %v`, got, err)
	}
	for _, in := range []string{"10.0.0.0/33", "10.0.0", "example.com", "fe80::1%eth0"} {
		if _, err := parseCIDRs(in); err == nil {
			t.Errorf("parseCIDRs(%q) = nil error", in)
		}
	}
}

func TestEnvironmentDefaults(t *testing.T) {
	if got := defaultPop("fra", "host-1"); got != "fra" {
		t.Errorf("defaultPop = %q", got)
	}
	if got := defaultPop("", "host-1"); got != "host-1" {
		t.Errorf("defaultPop without FLY_REGION = %q", got)
	}
	for _, row := range []struct{ fly, host, bind, want string }{
		{"e784079b449483", "host-1", ":7946", "e784079b449483"},
		{"e784079b449483", "host-1", ":7950", "e784079b449483"}, // the machine ID is unique already
		{"", "host-1", ":7946", "host-1"},
		{"", "host-1", "127.0.0.1:7946", "host-1"},
		{"", "host-1", "127.0.0.1:7950", "host-1-7950"},
		{"", "host-1", "[::1]:8000", "host-1-8000"},
		{"", "host-1", "bad", "host-1"},
		{"", "", ":7950", ""},
	} {
		if got := defaultNode(row.fly, row.host, row.bind); got != row.want {
			t.Errorf("defaultNode(%q, %q, %q) = %q, want %q", row.fly, row.host, row.bind, got, row.want)
		}
	}
	for region, want := range map[string]string{
		"ams": "EU", "IAD": "NA", "gru": "SA", "nrt": "AS", "syd": "OC", "jnb": "AF", "": "", "xyz": "",
	} {
		if got := defaultContinent(region); got != want {
			t.Errorf("defaultContinent(%q) = %q, want %q", region, got, want)
		}
	}
}
