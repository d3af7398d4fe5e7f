package exchange_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: remote channels, the server's
// per-stream receivers and blocked producers all have to wind down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
