package wire

// For the tests of package wire_test.
const (
	SerfEnvelope = serfEnvelope
	FormatFlate  = formatFlate
	KindPlain    = kindPlain
)
