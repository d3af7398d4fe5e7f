// Package clocktest is a clock for tests of timeout logic whose wall
// reading can be set forward or back while its monotonic reading advances
// only as the test says: what a daemon sees when its machine's clock is
// stepped under it (by an operator, or by NTP correcting a large offset).
//
// Go's time.Now carries both readings, and Sub, Before, After and Equal
// use the monotonic one when both operands have it, so logic that stays
// with those is immune to steps; logic that goes through Unix numbers,
// Round(0), UTC or a serialized time is not. Telling the two apart needs
// times whose readings disagree, which the time package has no way to
// build: a time from time.Unix has no monotonic reading, and Add moves both
// readings alike. WallShifted builds one by rewriting the wall reading of
// a time from time.Now in place, then checks the result through the
// public API, so a change of time.Time's representation fails the tests
// that use it instead of quietly turning the clock into an ordinary one.
package clocktest

import (
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// layout mirrors time.Time. With a monotonic reading (the top bit of wall
// set), wall holds 33 bits of wall seconds since 1885 above 30 bits of
// nanoseconds, and ext holds the monotonic reading.
type layout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const (
	hasMonotonic = 1 << 63
	secShift     = 30
)

// WallShifted returns t with its wall reading moved by d (whole seconds)
// and its monotonic reading kept. t must come from time.Now (or be derived
// from one with Add), so that it has a monotonic reading.
func WallShifted(t time.Time, d time.Duration) time.Time {
	if d%time.Second != 0 {
		panic(fmt.Sprintf("clocktest: wall shift %v is not whole seconds", d))
	}
	if unsafe.Sizeof(layout{}) != unsafe.Sizeof(time.Time{}) {
		panic("clocktest: time.Time changed its representation")
	}
	if d == 0 {
		return t
	}
	r := t
	p := (*layout)(unsafe.Pointer(&r))
	if p.wall&hasMonotonic == 0 {
		panic(fmt.Sprintf("clocktest: %v has no monotonic reading to keep", t))
	}
	// Two's complement: adding a negative count of seconds subtracts.
	p.wall += uint64(int64(d/time.Second)) << secShift
	// Whatever went wrong above (a carry out of the seconds field, another
	// encoding) shows here: the monotonic readings must still agree and the
	// wall readings differ by exactly d.
	if r.Sub(t) != 0 || r.Round(0).Sub(t.Round(0)) != d {
		panic(fmt.Sprintf("clocktest: shifting the wall reading of %v by %v gave %v", t, d, r))
	}
	return r
}

// Clock is a manual clock: time passes only through Advance, and its wall
// reading jumps only through StepWall. Its times carry a real monotonic
// reading (taken once, at New), so code under test treats them as it
// treats time.Now's. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	// mono is the reading without any step: time.Now at New plus what
	// Advance added.
	mono time.Time
	// step is how far the wall reading was set away from mono.
	step time.Duration
}

// New returns a clock at the current time, wall clock not stepped.
func New() *Clock { return &Clock{mono: time.Now()} }

// Now is the current time: the monotonic reading advanced by Advance, the
// wall reading also moved by every StepWall.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return WallShifted(c.mono, c.step)
}

// Advance lets d pass: both readings move by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono = c.mono.Add(d)
}

// StepWall sets the wall clock forward (d > 0) or back (d < 0) by d, in
// whole seconds; no time passes.
func (c *Clock) StepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step += d
}
