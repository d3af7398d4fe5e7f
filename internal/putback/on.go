//go:build failpoints

package putback

import "sync/atomic"

var active atomic.Pointer[string]

// Reintroduce puts bug back in the whole process until undo is called
// (tests only; one bug at a time).
func Reintroduce(bug string) (undo func()) {
	active.Store(&bug)
	return func() { active.Store(nil) }
}

// Active reports whether bug is put back.
func Active(bug string) bool {
	p := active.Load()
	return p != nil && *p == bug
}
