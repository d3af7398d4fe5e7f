// Package poll waits in tests for a state the system offers no
// notification of: the daemons have no push API for jobs or checkpoints,
// so polling what a user would see is the event. One helper, so every test
// bounds its wait the same way and says what it last saw.
package poll

import (
	"testing"
	"time"
)

// Until calls cond every interval until it reports done, and fails t if
// timeout passes first, with what and the last state cond described.
func Until(t testing.TB, timeout, interval time.Duration, what string, cond func() (done bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, last := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, last)
		}
		<-tick.C
	}
}

// UntilNoError is Until for conditions that can fail outright: an error
// fails t at once.
func UntilNoError(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	Until(t, timeout, interval, what, func() (bool, string) {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return ok, ""
	})
}

// Recv waits for a value on c, the event a test is notified of, and fails
// t if timeout passes first.
func Recv[T any](t testing.TB, c <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		panic("unreachable")
	}
}
