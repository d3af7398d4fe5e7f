package jobmanager

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// job's loop, its I/O and its coordinator must be gone once the JobManager
// stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
