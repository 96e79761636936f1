package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/gossip/simcluster"
)

// recorder wraps an entry's transport and counts what it writes: direct home packets (first
// byte 0xFB, gossip/internal/wire/packet.go) apart from memberlist's own (pings, acks, gossip).
type recorder struct {
	memberlist.NodeAwareTransport
	mu                   sync.Mutex
	directN, directBytes int
	otherN, otherBytes   int
}

func (r *recorder) count(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(b) > 0 && b[0] == 0xFB {
		r.directN++
		r.directBytes += len(b)
	} else {
		r.otherN++
		r.otherBytes += len(b)
	}
}

func (r *recorder) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	r.count(b)
	return r.NodeAwareTransport.WriteToAddress(b, a)
}

func (r *recorder) WriteTo(b []byte, addr string) (time.Time, error) {
	r.count(b)
	return r.NodeAwareTransport.WriteTo(b, addr)
}

func (r *recorder) take() (dn, db, on, ob int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dn, db, on, ob = r.directN, r.directBytes, r.otherN, r.otherBytes
	r.directN, r.directBytes, r.otherN, r.otherBytes = 0, 0, 0, 0
	return
}

// TestSizesMatchRealCodecs runs three real entries (gossip/simcluster on memnet, production
// encodings and sealing, the gossip key set) and measures the direct packets that batches of
// k real-looking homes become, and the size of memberlist's idle packets (pings and acks with
// serf's coordinates). The simulator's size model (sizes.go) must agree within 5 % for one
// home and within 10 % for full batches, and its batch capacity within 15 %.
func TestSizesMatchRealCodecs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real entries")
	}
	recs := make([]*recorder, 3)
	c, err := simcluster.New(simcluster.Options{Nodes: 3, Fast: true, Gossip: func(i int, cfg *gossip.Config) {
		recs[i] = &recorder{NodeAwareTransport: cfg.Transport}
		cfg.Transport = recs[i]
		cfg.Spread.FlushInterval = 400 * time.Millisecond // every k homes learned within one flush, even under -race
		cfg.Spread.MaxFlushInterval = time.Second
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitMembers(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // letting the join's gossip die down before the idle window
	for _, r := range recs {
		r.take()
	}
	time.Sleep(1500 * time.Millisecond) // the idle window: probes and acks only
	var on, ob int
	for _, r := range recs {
		_, _, n, b := r.take()
		on, ob = on+n, ob+b
	}
	if on == 0 {
		t.Fatal("no idle packets")
	}
	idleMean := float64(ob) / float64(on)
	t.Logf("idle memberlist packets: %d, mean %.1f B (model: ping %d, ack %d)", on, idleMean, pingBytes, ackBytes)
	if m := float64(pingBytes+ackBytes) / 2; m < idleMean*0.9 || m > idleMean*1.1 {
		t.Errorf("ping/ack mean %.1f B, measured %.1f B", m, idleMean)
	}

	rng := rand.New(rand.NewPCG(7, 7))
	e0 := c.Entry(0)
	for _, k := range []int{1, 2, 4, 8, 16, 32, 64, 128} {
		want := make(map[string]string, k)
		sum := 0
		b0 := e0.Metric("fenec_entry_gossip_direct_batches_sent_total")
		for range k {
			name := tenantName(rng)
			sum += len(name)
			want[name] = "ams"
			e0.Table.LearnName(name, "ams")
		}
		if err := c.WaitHomes(ctx, want); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // the last copies (2 x 50 ms after the first)
		batches := e0.Metric("fenec_entry_gossip_direct_batches_sent_total") - b0
		dn, db, _, _ := recs[0].take()
		recs[1].take()
		recs[2].take()
		// Every batch went to 2 peers, 3 times: the distinct batches' bytes are db/6.
		distinct := float64(db) / 6
		nb := int(batches)
		if want := (k + directCapacity - 1) / directCapacity; nb < want {
			t.Errorf("k=%d: %d batches; the model's capacity (%d) needs %d", k, nb, directCapacity, want)
		}
		// The model's bytes for k homes in nb batches. A flush tick that fell among the
		// learnings (likelier under -race) splits them in more batches than capacity needs,
		// and unevenly (a model of even batches then misses by up to 6 % at k=64): those
		// sizes are not compared.
		if need := (k + directCapacity - 1) / directCapacity; nb > need {
			t.Logf("k=%3d: a flush tick split the homes in %d batches (%d needed); sizes not compared", k, nb, need)
			if dn != 6*nb {
				t.Errorf("k=%d: %d direct packets for %d batches; want 6 a batch", k, dn, nb)
			}
			continue
		}
		model := 0.0
		for j := range nb {
			model += float64(directBytes(k*(j+1)/nb - k*j/nb))
		}
		t.Logf("k=%3d homes (%.1f B names): %d packets, %d batches; %.1f B a batch; model %.1f B",
			k, float64(sum)/float64(k), dn, nb, distinct/batches, model/batches)
		if dn != 6*nb {
			t.Errorf("k=%d: %d direct packets for %d batches; want 6 a batch", k, dn, nb)
		}
		if model < distinct*0.95 || model > distinct*1.05 {
			t.Errorf("k=%d: model %.1f B, measured %.1f B", k, model, distinct)
		}
	}
}
