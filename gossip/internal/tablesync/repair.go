package tablesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/gossip/internal/stablehash"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/homes/record"
	"github.com/fenec/fenec-entry/internal/clock"
)

// Anti-entropy repairs what gossip lost (serf's queue overflowed, a partition, a change feed
// that was full). Every Interval (jittered) an entry picks one random peer and:
//
//  1. GET /_gossip/digest: the peer's table as digestBuckets sums, over the homes older than the
//     puller's cutoff (now less RepairSettle, 2 s; header Fenec-Digest-Before): homes younger
//     are gossip's, in flight, and left out on both sides, so that at a million homes a round
//     does not pull whole buckets (about 3,900 homes each) for homes the peer is about to hear. A home's bucket is a hash of
//     its tenant; a bucket's sum is the sum mod 2^64 of a 64-bit hash of (tenant, region,
//     version) of each of its homes, so it depends on the set of homes, not on the order they
//     were inserted in, and two tables agree on a bucket exactly when (but for a 2^-64 chance)
//     they hold the same homes in it. A last sum covers the marks: each region's latest failure
//     and latest clear (region, clear or not, version).
//  2. It computes its own digest and compares; equal digests end the round, with no homes sent.
//  3. POST /_gossip/pull with the bitmap of the differing buckets: the peer streams back the
//     homes of those buckets and all its marks (at most two a region), sealed like a snapshot;
//     each is validated and applied with Apply/ApplyMark, which keep only what is newer.
//
// Why it converges: after A pulls from B, A holds for each differing bucket the newer of its
// own and B's home of each tenant (Apply's total order: version, then region name), so A's
// bucket is the union under that order; when B then pulls from A it gets the same union. Any
// pair that differs is repaired by two pulls, and since every entry pulls from a random peer
// each round, a lost home spreads like gossip: in O(log N) rounds to all N entries. A home
// learned meanwhile only makes a bucket differ again in the next round. A limit: a table at
// capacity keeps what it inserted last, so full tables that hold different sets of tenants
// keep differing (each round then re-sends those buckets; bounded by the stream bound).
// Marks are repaired like homes: a region's latest failure and latest clear are registers
// that only move to a newer version, so a clear that gossip lost arrives with the next pull
// and ends the failure it is newer than.
//
// A round pulls at most maxPullBuckets (64) of the differing buckets, from a cursor that moves
// on, so that after a long partition a large table is repaired over a few rounds, each
// bounded, rather than in one pull that a slow link cannot finish within the timeout.
//
// Cost per round, on each side: one digest (one Range over the table: see
// BenchmarkRepairDigest: about 4 ms at 50,000 homes and 0.11 s at a million on a 2-core VM,
// one 2 KB allocation), ~2.4 KB of digest on the wire, and for a pull one more Range on the
// peer plus ~30 B per home sent (a bucket of a million-home table: 117 KB). At the default
// 30 s interval that is well under 0.1 % of a core on each side at 50,000 homes, 0.4 % at a
// million.
const digestBuckets = record.DigestBuckets

// maxPullBuckets bounds the buckets one round pulls: a quarter of the table at most (at a
// million homes about 11 MB), the rest left to the next rounds (counted).
const maxPullBuckets = digestBuckets / 4

// beforeHeader carries the puller's cutoff on a digest request: the HLC below which homes
// count. Not covered by the request's proof: changing it changes only which homes are
// compared, never what is applied.
const beforeHeader = "Fenec-Digest-Before"

// settledBefore is the cutoff of a round at now: homes older than settle count.
func settledBefore(now time.Time, settle time.Duration) uint64 {
	ms := now.Add(-settle).UnixMilli()
	if ms <= 0 {
		return 0
	}
	return uint64(ms) << 16 // an HLC's physical part (homes.Version)
}

// digest is a table's bucket sums and its marks' sum, as the stream carries it.
type digest = record.Digest

// homeHash returns h's bucket and its term in the bucket's sum.
func homeHash(h homes.Home) (bucket int, sum uint64) {
	t := stablehash.String(stablehash.Offset, h.Tenant)
	bucket = int(stablehash.Mix(t) % digestBuckets)
	x := stablehash.String(t, h.Region)
	x = stablehash.Uint64(x, h.Version.HLC)
	x = stablehash.String(x, h.Version.Origin)
	return bucket, stablehash.Mix(x)
}

func bucketOf(tenant string) int { return int(stablehash.Of(tenant) % digestBuckets) }

func markHash(m homes.Mark) uint64 {
	x := stablehash.String(stablehash.Offset, m.Region)
	x = stablehash.Uint64(x, b2u(m.Clear))
	x = stablehash.Uint64(x, m.Version.HLC)
	return stablehash.Mix(stablehash.String(x, m.Version.Origin))
}

// computeDigest is one Range over t and one Marks: the homes whose version is older than
// before (an HLC; 0: every home), and every mark. pace, if set, is called after each home
// (digestPacer.wait).
func computeDigest(t *homes.Table, before uint64, pace func(n int)) *digest {
	d := new(digest)
	n := 0
	t.Range(func(h homes.Home, _ homes.Source) bool {
		if pace != nil {
			n++
			pace(n)
		}
		if before != 0 && h.Version.HLC >= before {
			return true
		}
		b, x := homeHash(h)
		d.Buckets[b] += x
		return true
	})
	for _, m := range t.Marks() {
		d.Marks += markHash(m)
	}
	return d
}

// digestPacer spreads a digest's CPU (0.1 s in one stretch at a million homes, every repair
// round on both sides): after every digestPaceEvery homes it sleeps as long as they took, so a
// digest takes at most half of a CPU and the entry's requests do not wait behind it for the
// scheduler's 10 ms slices (bench/joiner: tails of ~10 ms every 30 s with one CPU).
type digestPacer struct {
	last  time.Time
	now   func() time.Time
	sleep func(time.Duration)
}

const digestPaceEvery = 16384

func newDigestPacer() *digestPacer {
	return &digestPacer{last: clock.System.Now(), now: clock.System.Now, sleep: time.Sleep}
}

func (p *digestPacer) wait(n int) {
	if n%digestPaceEvery != 0 {
		return
	}
	p.sleep(p.now().Sub(p.last))
	p.last = p.now()
}

func (s *Sync) serveDigest(w http.ResponseWriter, r *http.Request) {
	who, aerr := s.authenticate(r)
	if aerr == nil && s.partial.Load() {
		aerr = errBootstrapping
	}
	if aerr != nil {
		s.writeError(w, "digest", aerr)
		return
	}
	// The puller's cutoff: both sides digest the same homes. Absent or bad (an older
	// puller): every home, as before.
	before, _ := strconv.ParseUint(r.Header.Get(beforeHeader), 10, 64)
	s.stream(w, r, "digest", who, func(sw *record.Writer) error {
		if err := sw.Header(s.cfg.Node, 0, 0); err != nil {
			return err
		}
		return sw.Digest(computeDigest(s.cfg.Table, before, newDigestPacer().wait))
	})
}

// pullVersion is the pull request's format, apart from the stream's.
const pullVersion = 1

// pullRequest is the body of POST /_gossip/pull: msgpack [pullVersion, bitmap], the bitmap
// digestBuckets/8 bytes, bit b (byte b/8, bit b%8) set for each bucket wanted.
type pullRequest struct {
	//lint:ignore U1000 read by msgpack through its tag: encode the struct as an array
	_msgpack struct{} `msgpack:",as_array"`
	Version  int
	Buckets  []byte
}

const maxPullBody = 1024

var errBadPull = &authError{http.StatusBadRequest, "bad_request", "the body is not a pull request of 256 buckets"}

func (s *Sync) servePull(w http.ResponseWriter, r *http.Request) {
	who, aerr := s.authenticate(r)
	if aerr == nil && s.partial.Load() {
		aerr = errBootstrapping
	}
	if aerr != nil {
		s.writeError(w, "pull", aerr)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPullBody))
	var req pullRequest
	if err == nil {
		err = msgpack.Unmarshal(body, &req)
	}
	if err != nil || req.Version != pullVersion || len(req.Buckets) != digestBuckets/8 {
		s.writeError(w, "pull", errBadPull)
		return
	}
	s.stream(w, r, "pull", who, func(sw *record.Writer) error {
		if err := sw.Header(s.cfg.Node, 0, 0); err != nil {
			return err
		}
		return s.writeTable(sw, func(tenant string) bool {
			b := bucketOf(tenant)
			return req.Buckets[b/8]&(1<<(b%8)) != 0
		})
	})
}

// RepairResult is what one repair round did.
type RepairResult struct {
	Buckets      int  // digest buckets that differed
	MarksDiffer  bool // the marks (latest failures and clears) differed
	Homes        int  // homes received
	HomesApplied int  // of which newer than what this table held
	MarksApplied int
	Invalid      int // homes and marks refused by validation
}

// Repair runs one anti-entropy round against peer: it compares digests and pulls the
// differing buckets (and the marks), applying what is newer. With equal digests it
// transfers no homes. Bounded by Config.Timeout. Safe to call concurrently with Run.
func (s *Sync) Repair(ctx context.Context, peer Peer) (res RepairResult, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	defer func() {
		switch se := (*StatusError)(nil); {
		case errors.As(err, &se) && se.Code == errBootstrapping.code:
			s.m.rounds.WithLabelValues("peer_bootstrapping").Inc()
		case err != nil:
			s.m.rounds.WithLabelValues("error").Inc()
		case res.Buckets == 0 && !res.MarksDiffer:
			s.m.rounds.WithLabelValues("in_sync").Inc()
		default:
			s.m.rounds.WithLabelValues("pulled").Inc()
		}
	}()
	before := settledBefore(s.cfg.Now(), s.cfg.RepairSettle)
	theirs, err := s.fetchDigest(ctx, peer, before)
	if err != nil {
		return res, fmt.Errorf("gossip: repair digest from %s: %w", peer.Name, err)
	}
	ours := computeDigest(s.cfg.Table, before, newDigestPacer().wait)
	req := pullRequest{Version: pullVersion, Buckets: make([]byte, digestBuckets/8)}
	var differ []int
	for b := range ours.Buckets {
		if ours.Buckets[b] != theirs.Buckets[b] {
			differ = append(differ, b)
		}
	}
	// At most maxPullBuckets a round, so that a round after a long partition carries a
	// bounded share of a large table: the differing buckets from a cursor that moves past
	// what each round took, so that the next rounds take the rest.
	if len(differ) > maxPullBuckets {
		s.m.deferred.Add(float64(len(differ) - maxPullBuckets))
		cur := int(s.pullCursor.Load())
		i, _ := slices.BinarySearch(differ, cur) // the first differing bucket at or after it
		differ = slices.Concat(differ[i:], differ[:i])[:maxPullBuckets]
		s.pullCursor.Store(uint32((differ[len(differ)-1] + 1) % digestBuckets))
	}
	for _, b := range differ {
		req.Buckets[b/8] |= 1 << (b % 8)
		res.Buckets++
	}
	res.MarksDiffer = ours.Marks != theirs.Marks
	s.m.buckets.Add(float64(res.Buckets))
	if res.Buckets == 0 && !res.MarksDiffer {
		return res, nil
	}
	body, err := msgpack.Marshal(&req)
	if err != nil {
		return res, err
	}
	resp, mac, err := s.call(ctx, peer, http.MethodPost, pathPull, body)
	if err != nil {
		return res, fmt.Errorf("gossip: repair pull from %s: %w", peer.Name, err)
	}
	defer resp.Body.Close()
	got, err := s.readStream(resp.Body, mac, viaRepair)
	res.Homes, res.HomesApplied, res.MarksApplied = got.homes, got.homesApplied, got.marksApplied
	res.Invalid = got.homesInv + got.marksInv
	if err != nil {
		return res, fmt.Errorf("gossip: repair pull from %s: %w", peer.Name, err)
	}
	return res, nil
}

func (s *Sync) fetchDigest(ctx context.Context, peer Peer, before uint64) (*digest, error) {
	resp, mac, err := s.callWith(ctx, peer, http.MethodGet, pathDigest, nil,
		map[string]string{beforeHeader: strconv.FormatUint(before, 10)})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	got, err := s.readStream(resp.Body, mac, viaRepair)
	if err != nil {
		return nil, err
	}
	if got.digest == nil {
		return nil, fmt.Errorf("%w: digest answer without a digest", record.ErrBadStream)
	}
	return got.digest, nil
}

// Run repairs against one random peer every RepairInterval, jittered ±25 % so that entries started
// together do not pull in step, until ctx ends. Failures are logged and counted; the next
// round picks again.
func (s *Sync) Run(ctx context.Context) {
	for {
		t := time.NewTimer(jitter(s.cfg.RepairInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.repairRound(ctx)
	}
}

func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}

func (s *Sync) repairRound(ctx context.Context) {
	if s.RepairPaused() {
		s.m.rounds.WithLabelValues("bootstrapping").Inc()
		return
	}
	peers := s.cfg.Peers()
	if len(peers) == 0 {
		s.m.rounds.WithLabelValues("no_peer").Inc()
		return
	}
	p := peers[rand.IntN(len(peers))]
	res, err := s.Repair(ctx, p)
	if err != nil {
		s.log.Warn().Err(err).Str("peer", p.Name).Msg("repair failed")
		return
	}
	if res.Buckets > 0 || res.MarksDiffer {
		s.log.Debug().Str("peer", p.Name).Int("buckets", res.Buckets).Int("homes", res.Homes).
			Int("applied", res.HomesApplied).Int("marks_applied", res.MarksApplied).
			Int("invalid", res.Invalid).Msg("repaired")
	}
}

// TableDigest is an order-independent digest of t's homes (tenant, region and version), as
// 16 hex digits: two entries whose tables hold the same homes show the same digest, so an
// operator or a test can compare tables at a glance (/status.json). Marks are left out: their
// expiries differ by when each entry heard them. Cost: one Range over the table (about 10 ms
// at 50,000 homes).
func TableDigest(t *homes.Table) string {
	var sum uint64
	t.Range(func(h homes.Home, _ homes.Source) bool {
		_, x := homeHash(h)
		sum += x
		return true
	})
	return fmt.Sprintf("%016x", sum)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
