package proxy

import (
	"errors"
	"net"
)

// outcome classifies one attempt at one router. Only the classification drives
// what happens next (decide); it is reached from the answer head (classifyAnswer)
// or the error's type (classifyFailure), both below; the I/O is in forward.go.
type outcome uint8

const (
	// outAnswer: an answer with Fenec-Shard: 1 and status < 500, or any
	// answer without Fenec-Shard below 500 (passed through as it is).
	outAnswer outcome = iota
	// outHome5xx: Fenec-Shard: 1, 5xx, Fenec-Home present: the router's own
	// 502 because the home's node is unreachable. No other region can help.
	outHome5xx
	// outShard5xx: Fenec-Shard: 1, 5xx, no Fenec-Home.
	outShard5xx
	// outNeverMade: the connection was never made (refused, DNS, no route,
	// dial timeout, TLS handshake), or a proxy's 521, 523, 525, 526, 530.
	// The router cannot have seen the request.
	outNeverMade
	// outMayHaveReached: failed after the request may have been written
	// (reset, EOF, no answer head within the answer timeout), or a 5xx
	// without Fenec-Shard (520, 522, 524, a load balancer's 502).
	outMayHaveReached
	// outStale: a reused keep-alive connection failed before one byte of
	// answer arrived (the router had closed it). For a retryable request the
	// same router is asked once more on a fresh connection; for any other it
	// is outMayHaveReached.
	outStale
	// outCanceled: the client went away; nothing more is done.
	outCanceled
)

var outcomeNames = [...]string{"answer", "home_5xx", "shard_5xx", "never_made", "may_have_reached", "stale", "canceled"}

func (o outcome) String() string { return outcomeNames[o] }

// action is what the request does after an attempt.
type action uint8

const (
	actDeliver    action = iota // hand this answer to the client
	actNextRouter               // try the region's next router (or the next region when none is left)
	actNextRegion               // skip the region's other routers, try the next region
	actRetrySame                // the same router once more, on a fresh connection
	actMayHaveRun               // answer 502 may_have_run; never re-send
	actStop                     // the client is gone
)

var actionNames = [...]string{"deliver", "next_router", "next_region", "retry_same", "may_have_run", "stop"}

func (a action) String() string { return actionNames[a] }

// decide is the outcome table of docs/REFERENCE.md, row by row. retryable is
// true for GET, HEAD and OPTIONS and for any request with Idempotency-Key.
// staleRetried says this attempt was already the one repeat on a fresh
// connection, which is never repeated again.
func decide(o outcome, retryable, staleRetried bool) action {
	switch o {
	case outAnswer, outHome5xx:
		return actDeliver
	case outShard5xx:
		if retryable {
			return actNextRegion
		}
		return actDeliver
	case outNeverMade:
		return actNextRouter
	case outStale:
		if retryable && !staleRetried {
			return actRetrySame
		}
		return decide(outMayHaveReached, retryable, staleRetried)
	case outMayHaveReached:
		if retryable {
			return actNextRouter
		}
		return actMayHaveRun
	default: // outCanceled
		return actStop
	}
}

// classifyAnswer turns an answer head into an outcome: whether it carries
// Fenec-Shard (it came from a Fenec router) and Fenec-Home, and its status.
func classifyAnswer(status int, shard, home bool) outcome {
	if shard {
		switch {
		case status < 500:
			return outAnswer
		case home:
			return outHome5xx
		default:
			return outShard5xx
		}
	}
	switch status {
	case 521, 523, 525, 526, 530: // a proxy in front could not connect to the router
		return outNeverMade
	}
	if status >= 500 {
		return outMayHaveReached
	}
	return outAnswer
}

// classifyFailure turns an attempt that got no answer head into an outcome by the error's
// type, never its text: canceled says the client went away; silentReuse says the
// connection was a reused one from which not one byte of answer came. The router cannot
// have seen a request whose connection was never made (*dialError); the client's own body
// breaking off (*clientBodyError) is the client's doing; a reused connection that failed
// silently, other than by the answer timeout, was stale (the router had closed it); any
// other failure may have reached the router.
func classifyFailure(err error, canceled, silentReuse bool) outcome {
	var de *dialError
	var cbe *clientBodyError
	switch {
	case canceled || errors.As(err, &cbe):
		return outCanceled
	case errors.As(err, &de):
		return outNeverMade
	case silentReuse && !isTimeout(err):
		return outStale
	}
	return outMayHaveReached
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isRetryable says whether a request may be sent again after it may have
// reached a router: safe methods, and writes the client made idempotent.
func isRetryable(method string, hasKey bool) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return hasKey
}
