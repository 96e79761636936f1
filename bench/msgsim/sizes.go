package main

import (
	"fmt"
	"math/rand/v2"
)

// Byte sizes of what entries send, as the real encodings give them. sizes_test.go measures
// the real ones (three real entries on memnet, production sealing) and fails when this model
// drifts from them; the README says where each number comes from.
const (
	// directSeal is what sealing adds to a direct packet's payload (gossip/internal/wire/packet.go
	// Overhead: magic, kind, 12 B nonce, 16 B AES-GCM tag).
	directSeal = 30
	// nodeNameBytes is the length of a node name ("e00" in gossipsim and here); every payload
	// carries its sender's name (gossip/internal/wire/event.go).
	nodeNameBytes = 3
	// payloadBudget is the most payload bytes a batch may have (gossip/internal/wire/event.go
	// Encoder.Budget: EventSizeLimit 1024 - serfEnvelope 48 - len(EventName)).
	payloadBudget = 1024 - 48 - len("fenec-homes")
	// itemOverhead is the publisher's estimate of a home's bytes besides its strings
	// (gossip/internal/spread/publish.go), which decides when a flush comes early.
	itemOverhead = 20
	regionBytes  = 3

	// relayPerHome is what a home forwarded by a relay adds: its version's origin ("o", omitted
	// when the origin is the sender; wire.Home), ~6 B raw for a 3-byte name, partly compressed. An
	// estimate: no relay exists in gossip/ yet.
	relayPerHome = 4.0

	// pingBytes and ackBytes are memberlist's probe packets with the label and AES-GCM
	// (the ack carries serf's network coordinate): measured idle by TestSizesMatchRealCodecs.
	// Measured: a mean of 155 B over both; the split is an estimate (a ping names its
	// source, an ack carries the coordinate).
	pingBytes = 95
	ackBytes  = 215
	// indirect probes: a ping request to each of 3 peers, their pings, acks and forwarded
	// acks, each about a ping's size.
	indirectChecks = 3

	// packetOverhead is what memberlist adds to a gossip packet (compound header 2, label 13,
	// AES-GCM 29: gossip/internal/wire/event.go DefaultEventSizeLimit) and perMsgOverhead what each
	// message inside it costs (its length in the compound header and its type).
	packetOverhead = 44
	perMsgOverhead = 3
	// serfEventOverhead is serf's user event envelope around name + payload (wire's
	// serfEnvelope is 48 with a margin; 38 without), plus the event name.
	serfEventOverhead = 38 + len("fenec-homes")
	// markPayload is a mark's event payload (wire's event.go: header 2 + name, msgpack of one
	// wire.Mark: region, observer time, version), DEFLATEd; an estimate from the encoding.
	markPayload = 2 + nodeNameBytes + 36
	// aliveMsgBytes is a memberlist alive message (name, address, port, meta with serf's
	// tags, incarnation, versions): an estimate for the optional membership churn.
	aliveMsgBytes = 110

	// Repair over TCP (gossip/internal/tablesync/repair.go, stream.go): per exchange the challenge
	// and the proven request and answer headers; the digest answer (256 msgpack uint64 and the
	// marks' sum, sealed); per home in a pull answer one record [2, tenant, region, hlc, origin],
	// and a seal every 256 records.
	httpExchangeBytes = 700
	digestBytes       = 256*9 + 60
	pullRequestBytes  = 60
	homeRecordBase    = 14 + regionBytes + nodeNameBytes // + the tenant name
	sealBytes         = 40
	sealEvery         = 256
	markRecordBytes   = 40

	// pushPullMemberBytes is what one member adds to a push/pull's state, sealed: measured at
	// 100 idle entries (gossipsim's idle_stream_bytes_per_entry_s, 24 B/s over 60 s, x the
	// push/pull interval, 90 s at 100 members, / (2 x 100)). memberlist compresses the state,
	// and gossipsim's names ("e00") and tags repeat: real names weigh more.
	pushPullMemberBytes = 11

	// nackBytes and heartbeatBytes are the relay strategy's control packets (sealed like a
	// direct packet: header, relay name, a sequence number or a list of them).
	nackBytes      = directSeal + 2 + nodeNameBytes + 12
	heartbeatBytes = directSeal + 2 + nodeNameBytes + 10
	// ackPacketBytes acks a batch (-ack): sealed, naming the batch (sender, 8 B id).
	ackPacketBytes = directSeal + 2 + nodeNameBytes + 10
)

// directSizes are the sealed direct packets of batches of k real homes (k, bytes), as
// TestSizesMatchRealCodecs measured them (tenant names as tenantName makes, 17.5 B on
// average; sender "e00"). Between two points the size is interpolated; past the last it
// grows by the last slope, up to directCapacity homes.
var directSizes = [...][2]float64{{1, 84}, {2, 112}, {4, 158}, {8, 237}, {16, 337}, {32, 525}, {64, 854}}

// directCapacity is how many such homes fit one batch (payloadBudget): 64 homes are 854 B
// and each more ~11 B, so ~75 fit 995 B (measured: 128 homes went in 2 batches).
const directCapacity = 75

// directBytes is the sealed direct packet of a batch of k homes (k >= 1).
func directBytes(k int) int {
	x := float64(k)
	p := directSizes[:]
	for i := 1; i < len(p); i++ {
		if x <= p[i][0] || i == len(p)-1 {
			a, b := p[i-1], p[i]
			return int(a[1] + (x-a[0])*(b[1]-a[1])/(b[0]-a[0]) + 0.5)
		}
	}
	return int(p[0][1])
}

// payloadBytes is the payload of a batch of k homes; relayed homes carry their origin.
func payloadBytes(k int, relayed bool) int {
	b := directBytes(k) - directSeal
	if relayed {
		b += int(relayPerHome*float64(k) + 0.5)
	}
	return b
}

// relayCapacity is how many relayed homes fit one batch.
var relayCapacity = int(float64(payloadBudget-payloadBytes(1, false)) / (11 + relayPerHome))

// tenantName is shaped like gossipsim's tenant slugs (two words and a number, 12-24 B),
// which compress as real ones do.
func tenantName(rng *rand.Rand) string {
	return fmt.Sprintf("%s-%s-%d", words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(100000))
}

var words = []string{"amber", "brisk", "cedar", "delta", "ember", "fjord", "gale", "harbor",
	"iris", "juniper", "kestrel", "lumen", "maple", "nimbus", "onyx", "pine", "quartz",
	"raven", "sable", "tundra", "umber", "vale", "willow", "zephyr"}
