package clientinfo

// countryContinents maps each ISO 3166-1 alpha-2 country code to the code of its continent,
// for --country-header (Cloudflare's CF-IPCountry, a load balancer's geo header). Continents
// follow GeoNames, as MaxMind and DB-IP do, so that a client gets the same continent from the
// header as from --geoip: Russia and Cyprus are in Europe; Turkey, Armenia, Azerbaijan,
// Georgia and Kazakhstan in Asia; Timor-Leste in Oceania; Egypt in Africa; Central America
// and the Caribbean in North America; the uninhabited southern territories in Antarctica.
// All 249 assigned codes are here, and XK (Kosovo), which is user-assigned but widely sent.
// Codes that name no country (CF-IPCountry's XX and T1, "EU", "AP") are absent: they give no
// continent.
var countryContinents = map[string]string{
	// Europe
	"AD": "EU", // Andorra
	"AL": "EU", // Albania
	"AT": "EU", // Austria
	"AX": "EU", // Åland Islands
	"BA": "EU", // Bosnia and Herzegovina
	"BE": "EU", // Belgium
	"BG": "EU", // Bulgaria
	"BY": "EU", // Belarus
	"CH": "EU", // Switzerland
	"CY": "EU", // Cyprus
	"CZ": "EU", // Czechia
	"DE": "EU", // Germany
	"DK": "EU", // Denmark
	"EE": "EU", // Estonia
	"ES": "EU", // Spain
	"FI": "EU", // Finland
	"FO": "EU", // Faroe Islands
	"FR": "EU", // France
	"GB": "EU", // United Kingdom
	"GG": "EU", // Guernsey
	"GI": "EU", // Gibraltar
	"GR": "EU", // Greece
	"HR": "EU", // Croatia
	"HU": "EU", // Hungary
	"IE": "EU", // Ireland
	"IM": "EU", // Isle of Man
	"IS": "EU", // Iceland
	"IT": "EU", // Italy
	"JE": "EU", // Jersey
	"LI": "EU", // Liechtenstein
	"LT": "EU", // Lithuania
	"LU": "EU", // Luxembourg
	"LV": "EU", // Latvia
	"MC": "EU", // Monaco
	"MD": "EU", // Moldova
	"ME": "EU", // Montenegro
	"MK": "EU", // North Macedonia
	"MT": "EU", // Malta
	"NL": "EU", // Netherlands
	"NO": "EU", // Norway
	"PL": "EU", // Poland
	"PT": "EU", // Portugal
	"RO": "EU", // Romania
	"RS": "EU", // Serbia
	"RU": "EU", // Russian Federation
	"SE": "EU", // Sweden
	"SI": "EU", // Slovenia
	"SJ": "EU", // Svalbard and Jan Mayen
	"SK": "EU", // Slovakia
	"SM": "EU", // San Marino
	"UA": "EU", // Ukraine
	"VA": "EU", // Holy See (Vatican City State)
	"XK": "EU", // Kosovo (user-assigned code, used by MaxMind, DB-IP and CDNs)

	// Asia
	"AE": "AS", // United Arab Emirates
	"AF": "AS", // Afghanistan
	"AM": "AS", // Armenia
	"AZ": "AS", // Azerbaijan
	"BD": "AS", // Bangladesh
	"BH": "AS", // Bahrain
	"BN": "AS", // Brunei Darussalam
	"BT": "AS", // Bhutan
	"CC": "AS", // Cocos (Keeling) Islands
	"CN": "AS", // China
	"GE": "AS", // Georgia
	"HK": "AS", // Hong Kong
	"ID": "AS", // Indonesia
	"IL": "AS", // Israel
	"IN": "AS", // India
	"IO": "AS", // British Indian Ocean Territory
	"IQ": "AS", // Iraq
	"IR": "AS", // Iran
	"JO": "AS", // Jordan
	"JP": "AS", // Japan
	"KG": "AS", // Kyrgyzstan
	"KH": "AS", // Cambodia
	"KP": "AS", // North Korea
	"KR": "AS", // South Korea
	"KW": "AS", // Kuwait
	"KZ": "AS", // Kazakhstan
	"LA": "AS", // Laos
	"LB": "AS", // Lebanon
	"LK": "AS", // Sri Lanka
	"MM": "AS", // Myanmar
	"MN": "AS", // Mongolia
	"MO": "AS", // Macao
	"MV": "AS", // Maldives
	"MY": "AS", // Malaysia
	"NP": "AS", // Nepal
	"OM": "AS", // Oman
	"PH": "AS", // Philippines
	"PK": "AS", // Pakistan
	"PS": "AS", // Palestine, State of
	"QA": "AS", // Qatar
	"SA": "AS", // Saudi Arabia
	"SG": "AS", // Singapore
	"SY": "AS", // Syria
	"TH": "AS", // Thailand
	"TJ": "AS", // Tajikistan
	"TM": "AS", // Turkmenistan
	"TR": "AS", // Türkiye
	"TW": "AS", // Taiwan
	"UZ": "AS", // Uzbekistan
	"VN": "AS", // Vietnam
	"YE": "AS", // Yemen

	// Africa
	"AO": "AF", // Angola
	"BF": "AF", // Burkina Faso
	"BI": "AF", // Burundi
	"BJ": "AF", // Benin
	"BW": "AF", // Botswana
	"CD": "AF", // Congo, The Democratic Republic of the
	"CF": "AF", // Central African Republic
	"CG": "AF", // Congo
	"CI": "AF", // Côte d'Ivoire
	"CM": "AF", // Cameroon
	"CV": "AF", // Cabo Verde
	"DJ": "AF", // Djibouti
	"DZ": "AF", // Algeria
	"EG": "AF", // Egypt
	"EH": "AF", // Western Sahara
	"ER": "AF", // Eritrea
	"ET": "AF", // Ethiopia
	"GA": "AF", // Gabon
	"GH": "AF", // Ghana
	"GM": "AF", // Gambia
	"GN": "AF", // Guinea
	"GQ": "AF", // Equatorial Guinea
	"GW": "AF", // Guinea-Bissau
	"KE": "AF", // Kenya
	"KM": "AF", // Comoros
	"LR": "AF", // Liberia
	"LS": "AF", // Lesotho
	"LY": "AF", // Libya
	"MA": "AF", // Morocco
	"MG": "AF", // Madagascar
	"ML": "AF", // Mali
	"MR": "AF", // Mauritania
	"MU": "AF", // Mauritius
	"MW": "AF", // Malawi
	"MZ": "AF", // Mozambique
	"NA": "AF", // Namibia
	"NE": "AF", // Niger
	"NG": "AF", // Nigeria
	"RE": "AF", // Réunion
	"RW": "AF", // Rwanda
	"SC": "AF", // Seychelles
	"SD": "AF", // Sudan
	"SH": "AF", // Saint Helena, Ascension and Tristan da Cunha
	"SL": "AF", // Sierra Leone
	"SN": "AF", // Senegal
	"SO": "AF", // Somalia
	"SS": "AF", // South Sudan
	"ST": "AF", // Sao Tome and Principe
	"SZ": "AF", // Eswatini
	"TD": "AF", // Chad
	"TG": "AF", // Togo
	"TN": "AF", // Tunisia
	"TZ": "AF", // Tanzania
	"UG": "AF", // Uganda
	"YT": "AF", // Mayotte
	"ZA": "AF", // South Africa
	"ZM": "AF", // Zambia
	"ZW": "AF", // Zimbabwe

	// North America
	"AG": "NA", // Antigua and Barbuda
	"AI": "NA", // Anguilla
	"AW": "NA", // Aruba
	"BB": "NA", // Barbados
	"BL": "NA", // Saint Barthélemy
	"BM": "NA", // Bermuda
	"BQ": "NA", // Bonaire, Sint Eustatius and Saba
	"BS": "NA", // Bahamas
	"BZ": "NA", // Belize
	"CA": "NA", // Canada
	"CR": "NA", // Costa Rica
	"CU": "NA", // Cuba
	"CW": "NA", // Curaçao
	"DM": "NA", // Dominica
	"DO": "NA", // Dominican Republic
	"GD": "NA", // Grenada
	"GL": "NA", // Greenland
	"GP": "NA", // Guadeloupe
	"GT": "NA", // Guatemala
	"HN": "NA", // Honduras
	"HT": "NA", // Haiti
	"JM": "NA", // Jamaica
	"KN": "NA", // Saint Kitts and Nevis
	"KY": "NA", // Cayman Islands
	"LC": "NA", // Saint Lucia
	"MF": "NA", // Saint Martin (French part)
	"MQ": "NA", // Martinique
	"MS": "NA", // Montserrat
	"MX": "NA", // Mexico
	"NI": "NA", // Nicaragua
	"PA": "NA", // Panama
	"PM": "NA", // Saint Pierre and Miquelon
	"PR": "NA", // Puerto Rico
	"SV": "NA", // El Salvador
	"SX": "NA", // Sint Maarten (Dutch part)
	"TC": "NA", // Turks and Caicos Islands
	"TT": "NA", // Trinidad and Tobago
	"US": "NA", // United States
	"VC": "NA", // Saint Vincent and the Grenadines
	"VG": "NA", // Virgin Islands, British
	"VI": "NA", // Virgin Islands, U.S.

	// South America
	"AR": "SA", // Argentina
	"BO": "SA", // Bolivia
	"BR": "SA", // Brazil
	"CL": "SA", // Chile
	"CO": "SA", // Colombia
	"EC": "SA", // Ecuador
	"FK": "SA", // Falkland Islands (Malvinas)
	"GF": "SA", // French Guiana
	"GY": "SA", // Guyana
	"PE": "SA", // Peru
	"PY": "SA", // Paraguay
	"SR": "SA", // Suriname
	"UY": "SA", // Uruguay
	"VE": "SA", // Venezuela

	// Oceania
	"AS": "OC", // American Samoa
	"AU": "OC", // Australia
	"CK": "OC", // Cook Islands
	"CX": "OC", // Christmas Island
	"FJ": "OC", // Fiji
	"FM": "OC", // Micronesia, Federated States of
	"GU": "OC", // Guam
	"KI": "OC", // Kiribati
	"MH": "OC", // Marshall Islands
	"MP": "OC", // Northern Mariana Islands
	"NC": "OC", // New Caledonia
	"NF": "OC", // Norfolk Island
	"NR": "OC", // Nauru
	"NU": "OC", // Niue
	"NZ": "OC", // New Zealand
	"PF": "OC", // French Polynesia
	"PG": "OC", // Papua New Guinea
	"PN": "OC", // Pitcairn
	"PW": "OC", // Palau
	"SB": "OC", // Solomon Islands
	"TK": "OC", // Tokelau
	"TL": "OC", // Timor-Leste
	"TO": "OC", // Tonga
	"TV": "OC", // Tuvalu
	"UM": "OC", // United States Minor Outlying Islands
	"VU": "OC", // Vanuatu
	"WF": "OC", // Wallis and Futuna
	"WS": "OC", // Samoa

	// Antarctica
	"AQ": "AN", // Antarctica
	"BV": "AN", // Bouvet Island
	"GS": "AN", // South Georgia and the South Sandwich Islands
	"HM": "AN", // Heard Island and McDonald Islands
	"TF": "AN", // French Southern Territories
}

// countryContinent returns the continent code of an ISO 3166-1 alpha-2 country code, in either
// case and with surrounding spaces, or "" for anything else. It does not allocate.
func countryContinent(code string) string {
	for len(code) > 0 && (code[0] == ' ' || code[0] == '\t') {
		code = code[1:]
	}
	for len(code) > 0 && (code[len(code)-1] == ' ' || code[len(code)-1] == '\t') {
		code = code[:len(code)-1]
	}
	if len(code) != 2 {
		return ""
	}
	b := [2]byte{upperASCII(code[0]), upperASCII(code[1])}
	return countryContinents[string(b[:])]
}

func upperASCII(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}
