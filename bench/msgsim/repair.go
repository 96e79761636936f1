package main

// Repair, as gossip/internal/tablesync/repair.go runs it over TCP: every Repair (±25 %) an entry A
// picks a random peer B; dial, challenge and GET /_gossip/digest (B's 256 bucket sums and its
// marks' sum as B holds them when the request arrives); A compares with its own digest when the
// answer arrives; if any bucket or the marks differ, challenge and POST /_gossip/pull: B streams
// every home it holds in the differing buckets (the simulated ones and TableHomes/256 a bucket of
// the homes every table holds) and all its marks, and A applies what it lacks when the stream
// arrives. TCP legs take one link latency each, are lossless, and their transfer time is not
// modelled.

type repairRound struct {
	a, b   int32
	step   int
	theirs [256]uint64
	marks  uint64
	diff   []uint8 // differing buckets
	homes  []int32 // simulated homes B streamed
	nmarks []int32 // marks B streamed
}

func (s *Sim) startRepair(a int32) {
	if s.cfg.Nodes < 2 {
		return
	}
	b := s.randomPeers(a, 1)[0]
	s.rounds = append(s.rounds, repairRound{a: a, b: b})
	id := int32(len(s.rounds) - 1)
	s.st.repairRounds++
	// dial (one round trip), challenge (one), the digest request's way there
	at := s.now + 2*(s.latency(a, b)+s.latency(b, a)) + s.latency(a, b)
	s.tcp(a, b, httpExchangeBytes/2)
	s.q.push(event{at: at, kind: evRepairStep, id: id})
}

func (s *Sim) repairStep(id int32) {
	r := &s.rounds[id]
	switch r.step {
	case 0: // at B: the digest
		r.theirs = s.nodes[r.b].sums
		r.marks = s.nodes[r.b].markSum
		s.tcp(r.b, r.a, httpExchangeBytes/2+digestBytes)
		r.step = 1
		s.q.push(event{at: s.now + s.latency(r.b, r.a), kind: evRepairStep, id: id})
	case 1: // at A: compare
		ours := &s.nodes[r.a]
		if s.cfg.RepairSettle > 0 {
			// Both digests over the homes older than the cutoff
			// (gossip/internal/tablesync/repair.go): B's as it holds them now, an approximation of
			// when its digest was taken.
			cut := s.now - ns(s.cfg.RepairSettle)
			for bk := range 256 {
				var sa, sb uint64
				for _, k := range s.buckets[bk] {
					if s.homes[k].t0 >= cut {
						continue
					}
					if s.has(k, r.a) {
						sa += s.homes[k].hash
					}
					if s.has(k, r.b) {
						sb += s.homes[k].hash
					}
				}
				if sa != sb {
					r.diff = append(r.diff, uint8(bk))
				}
			}
		} else {
			for bk := range 256 {
				if ours.sums[bk] != r.theirs[bk] {
					r.diff = append(r.diff, uint8(bk))
				}
			}
		}
		if m := s.cfg.RepairMaxBuckets; m > 0 && len(r.diff) > m {
			// From the cursor on, as many as a round pulls; the rest wait for later rounds.
			i := 0
			for i < len(r.diff) && r.diff[i] < ours.pullCursor {
				i++
			}
			s.st.repairDeferred += len(r.diff) - m
			r.diff = append(append([]uint8(nil), r.diff[i:]...), r.diff[:i]...)[:m]
			ours.pullCursor = r.diff[m-1] + 1
		}
		if len(r.diff) == 0 && ours.markSum == r.marks {
			s.st.repairInSync++
			r.done()
			return
		}
		s.st.repairBuckets += len(r.diff)
		s.tcp(r.a, r.b, httpExchangeBytes/2+pullRequestBytes)
		r.step = 2
		s.q.push(event{at: s.now + s.latency(r.a, r.b) + s.latency(r.b, r.a) + s.latency(r.a, r.b),
			kind: evRepairStep, id: id})
	case 2: // at B: stream the differing buckets and the marks
		bytes := httpExchangeBytes / 2
		records := 0
		for _, bk := range r.diff {
			for _, k := range s.buckets[bk] {
				if s.has(k, r.b) {
					r.homes = append(r.homes, k)
					bytes += homeRecordBase + int(s.homes[k].nameLen)
				}
			}
			base := s.cfg.TableHomes / 256
			records += base
			bytes += base * (homeRecordBase + 18)
		}
		r.nmarks = s.st.marksHeld(r.b)
		records += len(r.homes) + len(r.nmarks)
		bytes += len(r.nmarks)*markRecordBytes + (records/sealEvery+1)*sealBytes
		s.st.repairRecords += records
		s.tcp(r.b, r.a, bytes)
		r.step = 3
		s.q.push(event{at: s.now + s.latency(r.b, r.a), kind: evRepairStep, id: id})
	case 3: // at A: apply what is newer
		for _, k := range r.homes {
			if s.arrive(k, r.a, viaRepair) {
				s.st.repaired++
			}
		}
		for _, m := range r.nmarks {
			s.st.markArrivedBy(s, m, r.a, true)
		}
		s.st.repairPulled++
		r.done()
	}
}

// done frees what the round held.
func (r *repairRound) done() { r.diff, r.homes, r.nmarks = nil, nil, nil }
