package wan

import (
	"fmt"
	"time"
)

// The lab's sites: three regions, where tenants are homed, and four PoPs, where entries take
// requests. Each stands at a city of the measurement below.
var (
	// Regions: eu in Ireland (AWS eu-west-1), us in N. Virginia (us-east-1), ap in Singapore
	// (ap-southeast-1).
	Regions = []string{"eu", "us", "ap"}
	// PoPs: fra in Frankfurt (eu-central-1), sfo in N. California (us-west-1), nrt in Tokyo
	// (ap-northeast-1), syd in Sydney (ap-southeast-2).
	PoPs = []string{"fra", "sfo", "nrt", "syd"}
)

// DefaultLoss is the loss of every link of the matrix, each way: 0.5 %. It is not from the
// measurement (which gives round trips only); it is a chosen constant, pessimistic next to a
// cloud backbone, so that code built on the lab meets lost packets often enough to be tested.
const DefaultLoss = 0.005

// rttMillis holds the average round trip between two sites in milliseconds, from the table
// "Latency Between AWS Global Regions" as reproduced, average latency in ms from each region
// to each other, at https://acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html
// (figures published April 2017). The table gives each pair twice, once from each end; the
// two differ by at most 1.1 ms, and the value here is their mean, rounded to 0.1 ms. The
// figures are the 2017 internet: some paths (Frankfurt-Singapore, Sydney-Singapore) have got
// much shorter since, which does not matter for a lab that needs distances of the right kind.
var rttMillis = map[[2]string]float64{
	{"eu", "us"}:   80.5,
	{"eu", "ap"}:   238.6,
	{"us", "ap"}:   216.7,
	{"eu", "fra"}:  19.6,
	{"eu", "sfo"}:  153.2,
	{"eu", "nrt"}:  212.4,
	{"eu", "syd"}:  309.6,
	{"us", "fra"}:  88.6,
	{"us", "sfo"}:  72.2,
	{"us", "nrt"}:  145.3,
	{"us", "syd"}:  229.9,
	{"ap", "fra"}:  325.9,
	{"ap", "sfo"}:  174.0,
	{"ap", "nrt"}:  73.8,
	{"ap", "syd"}:  175.4,
	{"fra", "sfo"}: 166.6,
	{"fra", "nrt"}: 236.6,
	{"fra", "syd"}: 323.4,
	{"sfo", "nrt"}: 102.5,
	{"sfo", "syd"}: 157.7,
	{"nrt", "syd"}: 103.9,
}

// Sites returns every site of the matrix: the regions, then the PoPs.
func Sites() []string {
	return append(append([]string(nil), Regions...), PoPs...)
}

// RTT returns the measured round trip between sites a and b, and false if the matrix does not
// have the pair (or a equals b).
func RTT(a, b string) (time.Duration, bool) {
	ms, ok := rttMillis[[2]string{a, b}]
	if !ok {
		ms, ok = rttMillis[[2]string{b, a}]
	}
	if !ok {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// MatrixLink is the link from one site to another of the matrix: half the pair's round trip
// one way, and DefaultLoss. It panics on a pair the matrix does not have, so a typo in a
// site's name shows at once.
func MatrixLink(from, to string) Link {
	rtt, ok := RTT(from, to)
	if !ok {
		panic(fmt.Sprintf("wan: no round trip between %q and %q in the matrix", from, to))
	}
	return Link{Delay: rtt / 2, Loss: DefaultLoss}
}
