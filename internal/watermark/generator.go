package watermark

import (
	"slices"
	"strings"
	"time"
)

// DefaultInterval is the emission interval when Strategy.Interval is 0
// (Flink's default auto-watermark-interval).
const DefaultInterval = 200 * time.Millisecond

// Strategy configures a Generator.
type Strategy struct {
	// MaxOutOfOrderness bounds how late a record may be: a split's
	// watermark is its maximum timestamp minus this, minus 1ms (Flink's
	// formula: the watermark promises no record at or below it, and a
	// record exactly MaxOutOfOrderness late must still be on time).
	MaxOutOfOrderness time.Duration
	// IdleTimeout marks a split idle when it produced no record for this
	// long in processing time; 0 means never.
	IdleTimeout time.Duration
	// Interval is the minimum processing time between two emitted
	// watermarks; 0 means DefaultInterval. Emitting on every record would
	// flood the channels with watermarks for no benefit.
	Interval time.Duration
}

// Generator derives a source subtask's watermark and status from the
// records of the splits it reads. Each split has its own watermark, so a
// split that is read ahead of another does not make the other's records
// late; the subtask emits the minimum over the splits that are not idle.
//
// A split is idle once IdleTimeout passed without a record of it (or since
// it was added); a record makes it active again. The subtask is idle when
// all its splits are, or, when it has no split at all, once IdleTimeout
// passed since it was created or lost its last split.
//
// Idleness follows processing time, which only moves when the runtime
// passes it in; the state as of the latest instant passed in is what
// Explain reports.
type Generator struct {
	s      Strategy
	now    time.Time
	splits map[string]*split
	// emptySince is when the generator was created or lost its last split.
	emptySince time.Time
	wm         int64 // last emitted
	lastEmit   time.Time
	emitted    bool // anything emitted yet
	idle       bool // last reported status
	ended      bool
}

type split struct {
	maxTs        int64
	lastActivity time.Time // last record, or when added
	idle         bool
}

// SplitInfo is the state of one split.
type SplitInfo struct {
	ID           string
	MaxTimestamp int64 // Min before the first record
	Watermark    int64
	Idle         bool
}

// GeneratorExplanation is a generator's state.
type GeneratorExplanation struct {
	// Watermark is the last emitted watermark.
	Watermark int64
	// Combined is the minimum over the splits that are not idle: what the
	// next emission would be. Max when no split constrains it (there is
	// none, or all are idle); then nothing is emitted.
	Combined int64
	Idle     bool
	Splits   []SplitInfo // by ID
}

// NewGenerator returns a generator with no split and no watermark yet.
func NewGenerator(s Strategy, now time.Time) *Generator {
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	s.MaxOutOfOrderness = max(s.MaxOutOfOrderness, 0)
	return &Generator{s: s, now: now, splits: map[string]*split{}, emptySince: now, wm: Min}
}

// AddSplit registers a split the subtask now reads. It holds the watermark
// at Min until it produces records or goes idle: its records could be
// arbitrarily old. Adding a known split does nothing.
func (g *Generator) AddSplit(id string, now time.Time) {
	g.advance(now)
	g.add(id)
}

func (g *Generator) add(id string) *split {
	sp, ok := g.splits[id]
	if !ok {
		sp = &split{maxTs: Min, lastActivity: g.now}
		g.splits[id] = sp
	}
	return sp
}

// RemoveSplit forgets a finished split: it no longer holds the watermark
// back.
func (g *Generator) RemoveSplit(id string, now time.Time) {
	g.advance(now)
	if _, ok := g.splits[id]; !ok {
		return
	}
	delete(g.splits, id)
	if len(g.splits) == 0 {
		g.emptySince = g.now
	}
}

// OnRecord accounts for a record with timestamp ts of a split, adding the
// split if it is unknown. Records after End are ignored.
func (g *Generator) OnRecord(id string, ts int64, now time.Time) {
	if g.ended {
		return
	}
	g.advance(now)
	sp := g.add(id)
	sp.maxTs = max(sp.maxTs, ts)
	sp.lastActivity, sp.idle = g.now, false
}

// Poll returns what to emit now. A watermark is emitted when the combined
// watermark exceeds the last one emitted and Interval passed since that
// emission (or nothing was emitted yet). A status change is reported at the
// first Poll that sees it; while idle, no watermark is emitted.
func (g *Generator) Poll(now time.Time) Output {
	if g.ended {
		return g.output(g.wm, g.idle)
	}
	g.advance(now)
	prevWm, prevIdle := g.wm, g.idle
	g.idle = g.subtaskIdle()
	if c, ok := g.combined(); !g.idle && ok && c > g.wm && g.intervalElapsed() {
		g.wm, g.lastEmit, g.emitted = c, g.now, true
	}
	return g.output(prevWm, prevIdle)
}

// NextPoll returns the next instant at which Poll may return something new
// without any new record or split change: an idle timeout expiring, or the
// interval elapsing over an unemitted advance. It returns now if Poll has
// something already, and false if nothing is pending.
func (g *Generator) NextPoll(now time.Time) (time.Time, bool) {
	if g.ended {
		return time.Time{}, false
	}
	g.advance(now)
	if g.subtaskIdle() != g.idle {
		return g.now, true
	}
	var next time.Time
	found := false
	consider := func(t time.Time) {
		if !found || t.Before(next) {
			next, found = t, true
		}
	}
	if g.s.IdleTimeout > 0 {
		if len(g.splits) == 0 && !g.idle {
			consider(g.emptySince.Add(g.s.IdleTimeout))
		}
		for _, sp := range g.splits {
			if !sp.idle {
				consider(sp.lastActivity.Add(g.s.IdleTimeout))
			}
		}
	}
	if c, ok := g.combined(); !g.idle && ok && c > g.wm {
		if g.intervalElapsed() {
			consider(g.now)
		} else {
			consider(g.lastEmit.Add(g.s.Interval))
		}
	}
	return next, found
}

// End handles the end of input: the watermark becomes Max, so every
// downstream timer fires, and the subtask active, so consumers do not
// ignore that Max. Later calls change nothing.
func (g *Generator) End() Output {
	prevWm, prevIdle := g.wm, g.idle
	g.ended, g.wm, g.idle = true, Max, false
	return g.output(prevWm, prevIdle)
}

// Explain returns the generator's state as of the latest instant passed in.
func (g *Generator) Explain() GeneratorExplanation {
	c, _ := g.combined()
	e := GeneratorExplanation{Watermark: g.wm, Combined: c, Idle: g.idle}
	for id, sp := range g.splits {
		e.Splits = append(e.Splits, SplitInfo{ID: id, MaxTimestamp: sp.maxTs, Watermark: g.splitWatermark(sp), Idle: sp.idle})
	}
	slices.SortFunc(e.Splits, func(a, b SplitInfo) int { return strings.Compare(a.ID, b.ID) })
	return e
}

// advance moves processing time to now and marks the splits that timed out
// idle. Time never moves backwards: a caller's clock going back would
// otherwise revive idle splits.
func (g *Generator) advance(now time.Time) {
	if now.After(g.now) {
		g.now = now
	}
	if g.s.IdleTimeout <= 0 {
		return
	}
	for _, sp := range g.splits {
		if !g.now.Before(sp.lastActivity.Add(g.s.IdleTimeout)) {
			sp.idle = true
		}
	}
}

func (g *Generator) subtaskIdle() bool {
	if len(g.splits) == 0 {
		return g.s.IdleTimeout > 0 && !g.now.Before(g.emptySince.Add(g.s.IdleTimeout))
	}
	for _, sp := range g.splits {
		if !sp.idle {
			return false
		}
	}
	return true
}

// combined is the minimum watermark over the splits that are not idle;
// false (and Max) if there is none, so that a subtask without splits does
// not mistake having nothing to read for having read everything.
func (g *Generator) combined() (int64, bool) {
	c, ok := Max, false
	for _, sp := range g.splits {
		if !sp.idle {
			c, ok = min(c, g.splitWatermark(sp)), true
		}
	}
	return c, ok
}

func (g *Generator) splitWatermark(sp *split) int64 {
	lag := g.s.MaxOutOfOrderness.Milliseconds() + 1
	if sp.maxTs < Min+lag {
		return Min // the subtraction would wrap around
	}
	return sp.maxTs - lag
}

func (g *Generator) intervalElapsed() bool {
	return !g.emitted || !g.now.Before(g.lastEmit.Add(g.s.Interval))
}

func (g *Generator) output(prevWm int64, prevIdle bool) Output {
	return Output{Watermark: g.wm, Advanced: g.wm > prevWm, StatusChanged: g.idle != prevIdle, Idle: g.idle}
}
