package task

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: subtask loops, asynchronous
// snapshot parts waiting for channel state, remote channels.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
