package mux

import (
	"net"
	"sync"

	"github.com/hashicorp/memberlist"
)

// Transport sits under memberlist: it takes direct packets (those that begin with its
// packet magic) out of the packet stream and sync streams (those that begin with SyncMagic)
// out of the stream channel (streams.go), and passes everything else on. Its goroutines run
// until Shutdown, which memberlist calls.
type Transport struct {
	memberlist.NodeAwareTransport
	in        chan *memberlist.Packet
	streams   chan net.Conn
	magic     byte             // the first byte of a direct packet
	handle    func(pkt []byte) // a direct packet, still sealed; must not block
	sync      *Listener        // where sync streams go; nil: closed
	onRefused func(reason string)
	bytes     *Bytes

	mu      sync.Mutex            // guards sorting
	sorting map[net.Conn]struct{} // streams waiting for their first byte; closed by Shutdown

	// Shutdown closes closing first: the goroutines then drop what the inner transport still
	// hands them instead of forwarding it, and keep reading its channels, which memberlist's
	// NetTransport needs (its listeners block sending to unbuffered channels, and its Shutdown
	// waits for them). stop closes once the inner transport has shut down: they return.
	closing chan struct{}
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// NewTransport puts a Transport on inner: the packets that begin with magic go to handle, on
// the Transport's goroutine; the sync streams go to syncLn, and those it cannot take are
// closed and told to onRefused (nil: not told), as are the streams past the sorter's bound.
// Every packet and stream byte, each way, is added to bytes (nil: counted nowhere else).
func NewTransport(inner memberlist.NodeAwareTransport, magic byte, handle func([]byte), syncLn *Listener,
	onRefused func(string), bytes *Bytes) *Transport {
	if bytes == nil {
		bytes = new(Bytes)
	}
	t := &Transport{NodeAwareTransport: inner, in: make(chan *memberlist.Packet),
		streams: make(chan net.Conn), magic: magic, handle: handle, sync: syncLn, onRefused: onRefused, bytes: bytes,
		sorting: make(map[net.Conn]struct{}), closing: make(chan struct{}), stop: make(chan struct{})}
	t.wg.Add(2)
	go t.run()
	go t.sortStreams()
	return t
}

func (t *Transport) run() {
	defer t.wg.Done()
	src := t.NodeAwareTransport.PacketCh()
	for {
		select {
		case <-t.stop:
			return
		case p := <-src:
			t.bytes.PacketReceived.Add(uint64(len(p.Buf)))
			if len(p.Buf) > 0 && p.Buf[0] == t.magic {
				t.handle(p.Buf)
				continue
			}
			select {
			case t.in <- p:
			case <-t.closing: // dropped: memberlist is shutting down
			}
		}
	}
}

// PacketCh is what memberlist reads: every packet but the direct ones.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.in }

// Shutdown stops the filter and the transport under it. Safe to call twice.
func (t *Transport) Shutdown() error {
	var err error
	t.once.Do(func() {
		close(t.closing)
		t.mu.Lock()
		for c := range t.sorting {
			c.Close()
		}
		t.mu.Unlock()
		err = t.NodeAwareTransport.Shutdown() // its channels are still read meanwhile
		close(t.stop)
		t.wg.Wait()
	})
	return err
}
