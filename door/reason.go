package door

import "net/http"

// Reason is why the door refused a request: one rule of docs/REFERENCE.md, "At the door".
// Each has its status, its error code (the JSON "error") and a label (the metric's reason
// and the debug log line's).
type Reason uint8

const (
	None Reason = iota

	// 400 bad_request: the request line.
	BadRequestLine // not METHOD SP target SP HTTP/1.x, one space each
	BadMethod      // a method that is not an uppercase token
	BadTarget      // a target with bytes or a form the entry does not take ("*" but for OPTIONS)
	BadVersion     // a version other than HTTP/1.x
	// 400 bad_request: the lines of the head.
	BareCR           // a CR not followed by LF
	BareLF           // a line that ends in LF alone
	ObsFold          // a line that starts with SP or HTAB (obs-fold)
	SpaceBeforeColon // whitespace between a field name and its colon
	BadFieldName     // a field line without a colon, or a name that is not a token
	BadFieldValue    // a field value holding a control byte (NUL, ...) other than HTAB
	NoHost           // HTTP/1.1 without Host
	EmptyHost        // HTTP/1.1 with an empty Host
	RepeatedHost     // more than one Host line
	BadHost          // a Host holding bytes a host may not
	// 400 bad_request: the framing of the body.
	BadContentLength  // a Content-Length that is not one decimal number
	ContentLengths    // several Content-Length lines
	LengthAndChunked  // both Content-Length and Transfer-Encoding
	BadTransferCoding // a Transfer-Encoding that is not a list of codings, or chunked twice
	TransferCoding10  // a Transfer-Encoding on an HTTP/1.0 request
	BadChunk          // a malformed chunked body: size, extension, line end, CRLF after the data, trailer
	BodyCut           // the body ended before its length or its last chunk: the client stopped
	// 501 not_implemented.
	UnknownCoding // a transfer coding other than chunked (gzip, chunked)
	// 405 method_not_allowed.
	MethodNotAllowed // CONNECT, TRACE
	// 414 uri_too_long.
	RequestLineTooLong // a request line over MaxRequestLine
	// 431 headers_too_large.
	FieldLineTooLong // a field line over MaxFieldLine
	HeadTooLarge     // a head over MaxHead
	TooManyFields    // more than MaxFields field lines

	numReasons
)

// The door's limits (docs/REFERENCE.md, "At the door"): nginx's 8 KiB line, Envoy's 100 fields and
// 60 KiB head, rounded. They are constants, not flags: no router needs more, and a client
// that sends more is not one the entry serves.
const (
	MaxRequestLine = 8 << 10  // bytes of the request line, without its CRLF
	MaxFieldLine   = 16 << 10 // bytes of one field line, without its CRLF
	MaxHead        = 64 << 10 // bytes of a head (or a trailer section), from its first byte to its blank line
	MaxFields      = 100      // field lines of a head (or of a trailer section)
	maxChunkLine   = 1 << 10  // bytes of a chunk's size line, extensions and CRLF included
	maxEmptyLines  = 8        // empty lines taken before a request line (RFC 9112 section 2.2)
)

// Codes, the JSON "error" of a refusal (docs/REFERENCE.md, "Streams, cancellation, errors").
const (
	CodeBadRequest       = "bad_request"
	CodeNotImplemented   = "not_implemented"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeURITooLong       = "uri_too_long"
	CodeHeadersTooLarge  = "headers_too_large"
)

var reasons = [numReasons]struct {
	label  string
	status int
	msg    string
}{
	None:               {"none", http.StatusOK, ""},
	BadRequestLine:     {"bad_request_line", 400, "The request line must be METHOD, target and HTTP/1.1 (or HTTP/1.0), one space apart, ending in CRLF."},
	BadMethod:          {"bad_method", 400, "The method must be an uppercase token."},
	BadTarget:          {"bad_target", 400, "The request target must be an origin-form path, an http(s) URL, or * for OPTIONS."},
	BadVersion:         {"bad_version", 400, "The entry speaks HTTP/1.1 and HTTP/1.0 on this connection."},
	BareCR:             {"bare_cr", 400, "A CR in the head must be followed by LF."},
	BareLF:             {"bare_lf", 400, "Every line of the head must end in CRLF."},
	ObsFold:            {"obs_fold", 400, "A header line must not start with whitespace (obsolete line folding)."},
	SpaceBeforeColon:   {"space_before_colon", 400, "A header name must be followed by its colon, with no whitespace between."},
	BadFieldName:       {"bad_field_name", 400, "Every header line must be a token name, a colon and a value."},
	BadFieldValue:      {"bad_field_value", 400, "A header value must hold no control byte but HTAB."},
	NoHost:             {"no_host", 400, "An HTTP/1.1 request must carry a Host header."},
	EmptyHost:          {"empty_host", 400, "An HTTP/1.1 request's Host must not be empty."},
	RepeatedHost:       {"repeated_host", 400, "A request must carry one Host header, not several."},
	BadHost:            {"bad_host", 400, "The Host header holds bytes a host name may not."},
	BadContentLength:   {"bad_content_length", 400, "Content-Length must be one decimal number."},
	ContentLengths:     {"content_lengths", 400, "A request must carry one Content-Length header, not several."},
	LengthAndChunked:   {"length_and_chunked", 400, "A request must not carry both Content-Length and Transfer-Encoding."},
	BadTransferCoding:  {"bad_transfer_coding", 400, "Transfer-Encoding must be chunked, once."},
	TransferCoding10:   {"transfer_coding_http10", 400, "An HTTP/1.0 request must not carry Transfer-Encoding."},
	BadChunk:           {"bad_chunk", 400, "The chunked body is malformed."},
	BodyCut:            {"body_cut", 400, "The request body ended before its length or its last chunk."},
	UnknownCoding:      {"unknown_coding", 501, "The entry takes no transfer coding but chunked."},
	MethodNotAllowed:   {"method_not_allowed", 405, "CONNECT and TRACE are not served."},
	RequestLineTooLong: {"request_line_too_long", 414, "The request line is longer than 8 KiB."},
	FieldLineTooLong:   {"field_line_too_long", 431, "A header line is longer than 16 KiB."},
	HeadTooLarge:       {"head_too_large", 431, "The request head is larger than 64 KiB."},
	TooManyFields:      {"too_many_fields", 431, "The request head has more than 100 header lines."},
}

// Label is r's name in the metric fenec_entry_refused_total and in the log line.
func (r Reason) Label() string { return reasons[r].label }

// Status is the HTTP status r is answered with.
func (r Reason) Status() int { return reasons[r].status }

// Message is the one sentence of r's JSON error.
func (r Reason) Message() string { return reasons[r].msg }

// Code is r's JSON error code.
func (r Reason) Code() string {
	switch r.Status() {
	case 501:
		return CodeNotImplemented
	case 405:
		return CodeMethodNotAllowed
	case 414:
		return CodeURITooLong
	case 431:
		return CodeHeadersTooLarge
	}
	return CodeBadRequest
}

func (r Reason) String() string { return r.Label() }

// Reasons lists every reason but None, for a metric's children.
func Reasons() []Reason {
	out := make([]Reason, 0, numReasons-1)
	for r := None + 1; r < numReasons; r++ {
		out = append(out, r)
	}
	return out
}

// Error is a body the door could not read: a read of the request stream returns it in
// place of the bytes that break the rule, and every read after.
type Error struct{ Reason Reason }

func (e *Error) Error() string { return "door: " + e.Reason.Message() }
