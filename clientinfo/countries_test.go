package clientinfo

import "testing"

func TestCountryContinentsTable(t *testing.T) {
	// 249 ISO 3166-1 alpha-2 codes and XK.
	if got := len(countryContinents); got != 250 {
		t.Errorf("%d countries, want 250 (the 249 of ISO 3166-1 and XK)", got)
	}
	for code, continent := range countryContinents {
		if len(code) != 2 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z' {
			t.Errorf("%q is not a two-letter upper-case code", code)
		}
		if canonicalContinent(continent) != continent {
			t.Errorf("%s: %q is not a continent code (want EU, AF, NA, SA, AS, OC or AN)", code, continent)
		}
	}
}

func TestCountryContinent(t *testing.T) {
	for code, want := range map[string]string{
		"DE": "EU", "de": "EU", " Gb ": "EU", "RU": "EU", "CY": "EU", "XK": "EU",
		"US": "NA", "MX": "NA", "PA": "NA", "JM": "NA", "GL": "NA",
		"BR": "SA", "AR": "SA", "GF": "SA",
		"JP": "AS", "IN": "AS", "TR": "AS", "GE": "AS", "KZ": "AS", "AE": "AS",
		"AU": "OC", "NZ": "OC", "FJ": "OC",
		"ZA": "AF", "EG": "AF", "NG": "AF", "RE": "AF",
		"AQ": "AN", "TF": "AN",
		"": "", "XX": "", "T1": "", "EU": "", "DEU": "", "D": "", "1A": "",
	} {
		if got := countryContinent(code); got != want {
			t.Errorf("countryContinent(%q) = %q, want %q", code, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { countryContinent("fr") }); n != 0 {
		t.Errorf("countryContinent allocates %v times, want 0", n)
	}
}
