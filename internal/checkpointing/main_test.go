package checkpointing

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: the
// Driver's loop and every I/O goroutine it starts must be gone after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
