package rpcpolicy

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func TestVerdicts(t *testing.T) {
	for _, c := range []struct {
		code           codes.Code
		cancel, report Verdict
	}{
		{codes.OK, Done, Done},
		{codes.Unavailable, Unreachable, Retry},
		{codes.NotFound, NotThere, Refused},
		{codes.DeadlineExceeded, Retry, Retry},
		{codes.FailedPrecondition, Retry, Retry},
		{codes.InvalidArgument, Retry, Refused},
		{codes.PermissionDenied, Retry, Refused},
		{codes.Unauthenticated, Retry, Refused},
		{codes.Internal, Retry, Retry},
	} {
		if got := Cancel(c.code); got != c.cancel {
			t.Errorf("Cancel(%s) = %s, want %s", c.code, got, c.cancel)
		}
		if got := Report(c.code); got != c.report {
			t.Errorf("Report(%s) = %s, want %s", c.code, got, c.report)
		}
	}
}

func TestBackoffDoublesToMax(t *testing.T) {
	b := Retries()
	var got []time.Duration
	for range 8 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", got, want)
		}
	}
}
