package clientinfo

import "strings"

// flyRegions maps each Fly.io region code (FLY_REGION) to its continent code, for
// --continent's default. It holds the regions Fly lists today and those it has announced
// as deprecated but where machines may still run; a code not here gives no continent.
// Source: https://fly.io/docs/reference/regions/ (checked 2026).
var flyRegions = map[string]string{
	// Europe
	"ams": "EU", // Amsterdam, Netherlands
	"arn": "EU", // Stockholm, Sweden
	"cdg": "EU", // Paris, France
	"fra": "EU", // Frankfurt, Germany
	"lhr": "EU", // London, United Kingdom
	"mad": "EU", // Madrid, Spain (deprecated)
	"otp": "EU", // Bucharest, Romania (deprecated)
	"waw": "EU", // Warsaw, Poland (deprecated)

	// North America (Mexico and the United States included)
	"atl": "NA", // Atlanta, Georgia (deprecated)
	"bos": "NA", // Boston, Massachusetts (deprecated)
	"den": "NA", // Denver, Colorado (deprecated)
	"dfw": "NA", // Dallas, Texas
	"ewr": "NA", // Secaucus, New Jersey
	"gdl": "NA", // Guadalajara, Mexico (deprecated)
	"iad": "NA", // Ashburn, Virginia
	"lax": "NA", // Los Angeles, California
	"mia": "NA", // Miami, Florida (deprecated)
	"ord": "NA", // Chicago, Illinois
	"phx": "NA", // Phoenix, Arizona (deprecated)
	"qro": "NA", // Querétaro, Mexico (deprecated)
	"sea": "NA", // Seattle, Washington (deprecated)
	"sjc": "NA", // San Jose, California
	"yul": "NA", // Montreal, Canada (deprecated)
	"yyz": "NA", // Toronto, Canada

	// South America
	"bog": "SA", // Bogotá, Colombia (deprecated)
	"eze": "SA", // Ezeiza, Argentina (deprecated)
	"gig": "SA", // Rio de Janeiro, Brazil (deprecated)
	"gru": "SA", // São Paulo, Brazil
	"scl": "SA", // Santiago, Chile (deprecated)

	// Asia
	"bom": "AS", // Mumbai, India
	"hkg": "AS", // Hong Kong (deprecated)
	"maa": "AS", // Chennai, India (deprecated)
	"nrt": "AS", // Tokyo, Japan
	"sin": "AS", // Singapore

	// Oceania
	"syd": "OC", // Sydney, Australia

	// Africa
	"jnb": "AF", // Johannesburg, South Africa
}

// FlyContinent returns the continent code (EU, NA, SA, AS, OC, AF) of the Fly region code
// region (case-insensitive), and whether the code is known.
func FlyContinent(region string) (string, bool) {
	c, ok := flyRegions[strings.ToLower(strings.TrimSpace(region))]
	return c, ok
}
