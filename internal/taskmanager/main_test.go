package taskmanager

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: once
// Run returned, the registration loop, its RPCs and the leader follower
// must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
