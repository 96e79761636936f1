//go:build lab

package mux

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A lab build (go build -tags lab; bench/fleet builds it) gives one machine's fleet of real
// processes the network gossip/memnet simulates: with FENEC_LAB_LATENCY=min,max every packet
// the transport sends waits a one-way latency drawn uniformly from [min, max] (so packets
// may overtake each other) and every stream dial waits one; with FENEC_LAB_LOSS=p a packet
// is lost with probability p. Data on an open stream is not delayed, as in memnet. A
// production build has none of this (nolab.go).

type labNet struct {
	min, max time.Duration
	loss     float64
}

// lab is the environment's lab network, read once; a bad value ends the process (exit 2).
var lab = sync.OnceValue(func() labNet {
	n, err := readLab(os.Getenv("FENEC_LAB_LATENCY"), os.Getenv("FENEC_LAB_LOSS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fenec-entry: "+err.Error())
		os.Exit(2)
	}
	return n
})

func readLab(latency, loss string) (labNet, error) {
	var n labNet
	if latency != "" {
		lo, hi, ok := strings.Cut(latency, ",")
		a, err1 := time.ParseDuration(lo)
		b, err2 := time.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil || a < 0 || b < a {
			return n, fmt.Errorf("FENEC_LAB_LATENCY=%q: want min,max durations, 0 <= min <= max", latency)
		}
		n.min, n.max = a, b
	}
	if loss != "" {
		p, err := strconv.ParseFloat(loss, 64)
		if err != nil || !(p >= 0 && p < 1) {
			return n, fmt.Errorf("FENEC_LAB_LOSS=%q: want a probability in [0, 1)", loss)
		}
		n.loss = p
	}
	return n, nil
}

func (n labNet) latency() time.Duration {
	if n.max == 0 {
		return 0
	}
	return n.min + rand.N(n.max-n.min+1)
}

// sendPacket sends b by send after the lab's latency, or loses it.
func sendPacket(b []byte, send func([]byte) (time.Time, error)) (time.Time, error) {
	return lab().send(b, send)
}

func (n labNet) send(b []byte, send func([]byte) (time.Time, error)) (time.Time, error) {
	if n.loss > 0 && rand.Float64() < n.loss {
		return time.Now(), nil
	}
	d := n.latency()
	if d == 0 {
		return send(b)
	}
	cp := append([]byte(nil), b...) // the caller reuses b once this returns
	time.AfterFunc(d, func() { send(cp) })
	return time.Now(), nil
}

// dialWait is the lab's latency before a stream dial.
func dialWait() { time.Sleep(lab().latency()) }
