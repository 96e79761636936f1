package door

import (
	"strings"
	"testing"
)

// replay is a source that yields the same bytes at every read: a keep-alive connection's
// next request, as the server reads it.
type replay struct{ b []byte }

func (r *replay) Read(p []byte) (int, error) { return copy(p, r.b), nil }

// BenchmarkHead is the door's cost for a browser-sized head whole in one read (the common
// case: judged where it lies, in the server's buffer): its lines checked, nothing copied.
func BenchmarkHead(b *testing.B) {
	head := "GET /t/acme/items/1?x=1 HTTP/1.1\r\nHost: entry.example\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
		"Accept: text/html,application/xhtml+xml\r\nAccept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, deflate, br\r\n" +
		"Cookie: session=" + strings.Repeat("a", 64) + "\r\nIdempotency-Key: k-123\r\nX-Request-Id: r-1\r\n\r\n"
	d := NewReader(&replay{[]byte(head)})
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	for b.Loop() {
		if n, err := d.Read(buf); n != len(head) || err != nil {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkChunkedBody is the door's cost for a chunked body: 64 KiB in 1 KiB chunks.
func BenchmarkChunkedBody(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n")
	for range 64 {
		sb.WriteString("400\r\n" + strings.Repeat("x", 1024) + "\r\n")
	}
	sb.WriteString("0\r\n\r\n")
	req := []byte(sb.String())
	d := NewReader(&replay{req})
	buf := make([]byte, len(req))
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		if n, err := d.Read(buf); n != len(req) || err != nil {
			b.Fatal(n, err)
		}
	}
}

// oneByte yields its bytes one a read: a client sending its head a byte at a time.
type oneByte struct {
	b []byte
	i int
}

func (o *oneByte) Read(p []byte) (int, error) {
	if o.i == len(o.b) {
		o.i = 0
	}
	p[0] = o.b[o.i]
	o.i++
	return 1, nil
}

// BenchmarkHeadByteAtATime is a 60 KiB head that comes a byte at a time: the door's cost must
// stay linear in the bytes (it once moved the held head at every read, quadratic).
func BenchmarkHeadByteAtATime(b *testing.B) {
	head := "GET / HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 600)+"\r\n", 99) + "\r\n"
	d := NewReader(&oneByte{b: []byte(head)})
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	for b.Loop() {
		for n := 0; n < len(head); {
			m, err := d.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			n += m
		}
	}
}
