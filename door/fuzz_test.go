package door

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// refReq is one request as refFrame frames it: what a router must see of it.
type refReq struct {
	method, target string
	body           string
}

// refFrame frames raw the plainest way, independently of the door: CRLF lines, token names,
// an exact "Content-Length: digits" (several that agree taken as one) or one
// "Transfer-Encoding: chunked", chunks of plain hex
// sizes with no extensions and no trailers. It returns the requests it could frame, up to
// the first it could not: past that point it has nothing to say (the door may refuse it, or
// frame what refFrame does not take).
func refFrame(raw []byte) []refReq {
	var out []refReq
	for len(raw) > 0 {
		for range maxEmptyLines {
			if !bytes.HasPrefix(raw, []byte("\r\n")) {
				break
			}
			raw = raw[2:]
		}
		end := bytes.Index(raw, []byte("\r\n\r\n"))
		if end < 0 {
			return out
		}
		head := string(raw[:end])
		raw = raw[end+4:]
		if strings.Count(head, "\n") != strings.Count(head, "\r\n") || strings.Count(head, "\r") != strings.Count(head, "\r\n") {
			return out // a bare CR or LF
		}
		lines := strings.Split(head, "\r\n")
		parts := strings.Split(lines[0], " ")
		if len(parts) != 3 {
			return out
		}
		r := refReq{method: parts[0], target: parts[1]}
		cl, chunked := -1, false
		for _, line := range lines[1:] {
			name, value, ok := strings.Cut(line, ":")
			if !ok || !httpsyntax.Token(name) {
				return out // no name, a folded line, whitespace before the colon
			}
			value = strings.Trim(value, " \t")
			switch strings.ToLower(name) {
			case "content-length":
				n, err := strconv.Atoi(value)
				if err != nil || n < 0 || len(value) > 9 || strings.Trim(value, "0123456789") != "" || cl >= 0 && n != cl {
					return out
				}
				cl = n
			case "transfer-encoding":
				if !strings.EqualFold(value, "chunked") || chunked {
					return out
				}
				chunked = true
			}
		}
		switch {
		case chunked && cl >= 0:
			return out
		case chunked:
			var body []byte
			for {
				eol := bytes.Index(raw, []byte("\r\n"))
				if eol < 1 || eol > 8 {
					return out
				}
				size, err := strconv.ParseUint(string(raw[:eol]), 16, 32)
				if err != nil || strings.ContainsAny(string(raw[:eol]), "+-_xX") {
					return out
				}
				raw = raw[eol+2:]
				if size == 0 {
					if !bytes.HasPrefix(raw, []byte("\r\n")) {
						return out
					}
					raw = raw[2:]
					break
				}
				if uint64(len(raw)) < size+2 || string(raw[size:size+2]) != "\r\n" {
					return out
				}
				body = append(body, raw[:size]...)
				raw = raw[size+2:]
			}
			r.body = string(body)
		case cl > 0:
			if len(raw) < cl {
				return out
			}
			r.body, raw = string(raw[:cl]), raw[cl:]
		}
		out = append(out, r)
	}
	return out
}

// served is what a server reading through the door made of a stream: the requests a router
// would be sent (their bodies read whole), and how the stream ended.
type served struct {
	reqs    []refReq
	refused bool // it ended with a stand-in
}

func serveRaw(t *testing.T, raw []byte, srcChunk int) served {
	d := NewReader(&chunkReader{src: raw, n: srcChunk})
	br := bufio.NewReader(d)
	var s served
	for {
		req, err := http.ReadRequest(br)
		if err == io.EOF {
			return s
		}
		if err != nil {
			// net/http refused a head the door let through: the two read it differently.
			t.Fatalf("net/http refused what the door let through: %v", err)
		}
		if _, ok := Refusal(req); ok {
			s.refused = true
			if _, err := http.ReadRequest(br); err != io.EOF {
				t.Fatalf("after a stand-in: %v, want the end", err)
			}
			return s
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			// net/http's chunked reader may say it in its own words (a trailer cut off by the
			// door reads as "suspiciously long"), but the door must have failed the body too,
			// or the body must have been cut short by the client.
			if !d.Refused() && !errors.Is(err, io.ErrUnexpectedEOF) {
				// net/http's body reader failed where the door's did not.
				t.Fatalf("net/http failed a body the door let through: %v\n%q", err, raw)
			}
			return s // answered 400: the router's request, if any, is cut off
		}
		s.reqs = append(s.reqs, refReq{method: req.Method, target: req.RequestURI, body: string(body)})
	}
}

// FuzzDoor holds the door to its promise, for any bytes a client sends: a router never sees
// a request that the client did not frame exactly once, and nothing is served for a body the
// door could not read. The server reading through the door (net/http's parser, as both of
// the entry's servers use) never refuses what the door let through nor reads a body the
// door's rules did not, and every request it serves is, in order, one that refFrame (an
// independent framer) frames the same, method, target and body, for as far as refFrame
// can frame the bytes. The same whatever the bytes' cuts.
func FuzzDoor(f *testing.F) {
	for _, row := range headRows {
		f.Add([]byte(row.head + get))
	}
	for _, row := range bodyRows {
		f.Add([]byte("POST /t/a HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n" + row.body + get))
	}
	f.Add([]byte("POST /t/a HTTP/1.1\r\nHost: e\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: e\r\n\r\n"))
	f.Add([]byte("POST /t/a HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\n\r\nhello" + get))
	f.Fuzz(func(t *testing.T, raw []byte) {
		whole := serveRaw(t, raw, len(raw)+1)
		for _, cut := range []int{1, 7} {
			if s := serveRaw(t, raw, cut); len(s.reqs) != len(whole.reqs) || s.refused != whole.refused {
				t.Fatalf("cut in %d-byte pieces: %d requests (refused %v); whole: %d (refused %v)",
					cut, len(s.reqs), s.refused, len(whole.reqs), whole.refused)
			}
		}
		ref := refFrame(raw)
		for i, got := range whole.reqs {
			if i >= len(ref) {
				break // past what refFrame frames
			}
			if got != ref[i] {
				t.Fatalf("request %d served as %+v; framed by the client as %+v", i, got, ref[i])
			}
		}
	})
}
