//go:build failpoints

package sinktxn

import "sync/atomic"

var reintroduced atomic.Int64

// Reintroduce makes every machine of the process behave with bug b until
// the returned function is called (tests only; one bug at a time).
func Reintroduce(b Bug) (undo func()) {
	reintroduced.Store(int64(b))
	return func() { reintroduced.Store(int64(bugNone)) }
}

func has(b Bug) bool { return reintroduced.Load() == int64(b) }
