package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestOutcomeTable is the outcome table of docs/REFERENCE.md, row by row: what
// one attempt's answer or failure is classified as, and what the request does
// next, for retryable (GET/HEAD/OPTIONS or Idempotency-Key) and other requests.
func TestOutcomeTable(t *testing.T) {
	type want struct{ retryable, other action }
	rows := []struct {
		name  string
		out   outcome
		stale bool // already the one repeat on a fresh connection
		want  want
	}{
		{"shard answer below 500", outAnswer, false, want{actDeliver, actDeliver}},
		{"shard 5xx with Fenec-Home: no other region", outHome5xx, false, want{actDeliver, actDeliver}},
		{"shard 5xx without Fenec-Home", outShard5xx, false, want{actNextRegion, actDeliver}},
		{"connection never made", outNeverMade, false, want{actNextRouter, actNextRouter}},
		{"may have reached", outMayHaveReached, false, want{actNextRouter, actMayHaveRun}},
		{"stale keep-alive connection", outStale, false, want{actRetrySame, actMayHaveRun}},
		{"stale again after the one repeat", outStale, true, want{actNextRouter, actMayHaveRun}},
		{"client gone", outCanceled, false, want{actStop, actStop}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			if got := decide(row.out, true, row.stale); got != row.want.retryable {
				t.Errorf("retryable: decide(%v) = %v, want %v", row.out, got, row.want.retryable)
			}
			if got := decide(row.out, false, row.stale); got != row.want.other {
				t.Errorf("other write: decide(%v) = %v, want %v", row.out, got, row.want.other)
			}
		})
	}
}

func TestClassifyAnswer(t *testing.T) {
	rows := []struct {
		name        string
		status      int
		shard, home bool
		want        outcome
	}{
		{"router 200", 200, true, false, outAnswer},
		{"router 404 refusal", 404, true, true, outAnswer},
		{"router 499", 499, true, false, outAnswer},
		{"router's own 502, home named", 502, true, true, outHome5xx},
		{"router 503 without home", 503, true, false, outShard5xx},
		{"router 500 without home", 500, true, false, outShard5xx},
		{"proxy 521 origin down", 521, false, false, outNeverMade},
		{"proxy 523 origin unreachable", 523, false, false, outNeverMade},
		{"proxy 525 TLS handshake", 525, false, false, outNeverMade},
		{"proxy 526 bad certificate", 526, false, false, outNeverMade},
		{"proxy 530", 530, false, false, outNeverMade},
		{"proxy 520 unknown", 520, false, false, outMayHaveReached},
		{"proxy 522 timeout", 522, false, false, outMayHaveReached},
		{"proxy 524 timeout after connect", 524, false, false, outMayHaveReached},
		{"load balancer 502", 502, false, false, outMayHaveReached},
		{"load balancer 503", 503, false, false, outMayHaveReached},
		{"unmarked 521 with a Fenec-Home is still a proxy's", 521, false, true, outNeverMade},
		{"unmarked 404 passes through", 404, false, false, outAnswer},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			if got := classifyAnswer(row.status, row.shard, row.home); got != row.want {
				t.Errorf("classifyAnswer(%d, shard=%v, home=%v) = %v, want %v", row.status, row.shard, row.home, got, row.want)
			}
		})
	}
}

func TestIsRetryable(t *testing.T) {
	rows := []struct {
		method string
		key    bool
		want   bool
	}{
		{"GET", false, true}, {"HEAD", false, true}, {"OPTIONS", false, true},
		{"POST", false, false}, {"PUT", false, false}, {"PATCH", false, false}, {"DELETE", false, false},
		{"POST", true, true}, {"DELETE", true, true},
	}
	for _, row := range rows {
		if got := isRetryable(row.method, row.key); got != row.want {
			t.Errorf("isRetryable(%s, key=%v) = %v, want %v", row.method, row.key, got, row.want)
		}
	}
}

// TestClassifyFailure: an attempt without an answer head is classified by its error's type,
// wrapped or not, never by its text.
func TestClassifyFailure(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	rows := []struct {
		name                  string
		err                   error
		canceled, silentReuse bool
		want                  outcome
	}{
		{"dial refused", &dialError{refused}, false, false, outNeverMade},
		{"TLS handshake", &dialError{errors.New("tls: handshake failure")}, false, false, outNeverMade},
		{"dial error wrapped", fmt.Errorf("get: %w", &dialError{refused}), false, false, outNeverMade},
		{"dial error, client gone", &dialError{context.Canceled}, true, false, outCanceled},
		{"client body broke off", &clientBodyError{io.ErrUnexpectedEOF}, false, false, outCanceled},
		{"client body wrapped, on a silent reused connection", fmt.Errorf("write: %w", &clientBodyError{reset}), false, true, outCanceled},
		{"client gone mid-write", reset, true, true, outCanceled},
		{"reset on a silent reused connection", reset, false, true, outStale},
		{"EOF on a silent reused connection", io.EOF, false, true, outStale},
		{"answer timeout on a silent reused connection", timeout, false, true, outMayHaveReached},
		{"reset on a fresh connection", reset, false, false, outMayHaveReached},
		{"EOF after bytes of answer", io.ErrUnexpectedEOF, false, false, outMayHaveReached},
		{"refused but not a dial error: may have reached", refused, false, false, outMayHaveReached},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			if got := classifyFailure(row.err, row.canceled, row.silentReuse); got != row.want {
				t.Errorf("classifyFailure(%v, canceled %v, silent reuse %v) = %v, want %v",
					row.err, row.canceled, row.silentReuse, got, row.want)
			}
		})
	}
}
