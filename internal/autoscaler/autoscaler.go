// Package autoscaler decides a running job's parallelism from its load, by
// the algorithm of Flink's autoscaler: each vertex's true processing rate
// (the records it handles per second of busy time), the rate it must
// handle to keep up with its sources' input and to catch up their backlog
// within a set time, and the parallelism at which that rate uses the
// target share of its capacity. Stabilisation after every restart, a
// scale-down delay, per-vertex bounds and a limit on rescales per hour
// keep it from oscillating.
//
// Autoscaler is a pure state machine, in the manner of the coordinator:
// the JobManager's driver feeds it samples of the job's load with the
// time, carries out the rescales it asks for and reports how they went.
// Every decision, and every time it decides to do nothing, leaves an entry
// in its history with the reason.
package autoscaler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Observation is the job as the driver saw it at one moment.
type Observation struct {
	// Running: the job is RUNNING; State names its state otherwise.
	Running bool
	State   string
	// Restarts counts the job's restarts: a change means the job started
	// again (a failover), so earlier samples no longer describe it.
	Restarts int32
	// Units are the job's vertices as they run, chains joined, in
	// topological order.
	Units []Unit
	// Slots is how many slots the job could hold: those it holds and the
	// cluster's free ones.
	Slots int
}

// Unit is one vertex, or a chain of vertices that run as one subtask and
// so scale together.
type Unit struct {
	// Name is the unit's head vertex; Vertices are all its vertices.
	Name     string
	Vertices []string
	// Inputs are the units it reads.
	Inputs      []string
	Parallelism int32
	// MaxParallelism is the job's: the number of key groups.
	MaxParallelism   int32
	SlotSharingGroup string
	// Source: the unit reads outside input; Keyed: it reads keyed input,
	// so its parallelism is best a divisor of the key groups.
	Source bool
	Keyed  bool
	// Reporting is how many of its subtasks reported their load.
	Reporting int32
	// BusyMsPerSecond is the mean over its subtasks; the rates are sums.
	BusyMsPerSecond     float64
	RecordsInPerSecond  float64
	RecordsOutPerSecond float64
	// PendingRecords is a source's backlog (Kafka lag), negative when
	// unknown; Splits the number of splits (partitions) its subtasks
	// read, 0 when unknown: more subtasks than splits would idle.
	PendingRecords int64
	Splits         int32
}

// Decision asks the driver to rescale: Parallelism has every vertex of
// every unit that changes, From every vertex's parallelism the decision
// was made at (the driver refuses it if the job changed meanwhile).
type Decision struct {
	Parallelism map[string]int32
	From        map[string]int32
	Reason      string
}

// Autoscaler is one job's. It is not safe for concurrent use: the
// JobManager's driver goroutine owns it.
type Autoscaler struct {
	cfg Config

	// samples are those of the current window, oldest first; none before
	// stableFrom count.
	samples    []sample
	stableFrom time.Time
	// lastEval is when the autoscaler last decided (or decided to wait).
	lastEval time.Time
	// seen is the job's shape when last observed, to tell restarts.
	seen     map[string]int32
	restarts int32
	running  bool
	// awaitResume: the job is (re)starting by the autoscaler's own hand,
	// or was not yet seen running; its first RUNNING observation starts
	// the stabilization time, however long the start took.
	awaitResume bool
	// downSince is when each unit's scale-down was first asked for, at
	// every decision since.
	downSince map[string]time.Time
	// rescales are the times of its rescales within the past hour.
	rescales []time.Time
	// pending is the rescale the driver is carrying out.
	pending *Decision

	history []Entry
}

type sample struct {
	at    time.Time
	units []Unit
}

// historyLimit bounds the entries kept; repeats of a non-decision share
// one entry, so this spans long quiet periods.
const historyLimit = 200

// New returns the autoscaler of a job observed from now on. rescales are
// the times of its earlier rescales (kept with the job, so that a new
// leader keeps the hourly limit).
func New(cfg Config, now time.Time, rescales []time.Time) *Autoscaler {
	a := &Autoscaler{cfg: cfg, downSince: map[string]time.Time{}, lastEval: now, awaitResume: true}
	for _, t := range rescales {
		if now.Sub(t) < time.Hour {
			a.rescales = append(a.rescales, t)
		}
	}
	a.stableFrom = now.Add(cfg.Stabilization)
	return a
}

// Config is the configuration a was made with.
func (a *Autoscaler) Config() Config { return a.cfg }

// Rescales are the times of the rescales of the past hour, for the driver
// to keep with the job.
func (a *Autoscaler) Rescales() []time.Time { return slices.Clone(a.rescales) }

// History is a copy of the entries, oldest first.
func (a *Autoscaler) History() []Entry {
	out := make([]Entry, len(a.history))
	for i, e := range a.history {
		out[i] = e.clone()
	}
	return out
}

// Last is the newest entry, false when there is none yet.
func (a *Autoscaler) Last() (Entry, bool) {
	if len(a.history) == 0 {
		return Entry{}, false
	}
	return a.history[len(a.history)-1].clone(), true
}

// Observe takes a sample of the job at now. It returns a decision when the
// job should be rescaled: the driver carries it out and reports with
// Rescaled or RescaleFailed; until then Observe asks for nothing.
func (a *Autoscaler) Observe(now time.Time, o Observation) *Decision {
	if a.pending != nil {
		return nil
	}
	a.trackRestarts(now, o)
	ready, wait := a.sampleable(o)
	if ready && !now.Before(a.stableFrom) {
		a.samples = append(a.samples, sample{at: now, units: slices.Clone(o.Units)})
	}
	a.trim(now)
	if now.Sub(a.lastEval) < a.cfg.Interval {
		return nil
	}
	a.lastEval = now
	switch {
	case !ready:
		a.record(Entry{Time: now, Kind: KindWaiting, Reason: wait})
		return nil
	case now.Before(a.stableFrom):
		a.record(Entry{Time: now, Kind: KindStabilizing, Reason: fmt.Sprintf("stabilizing after the job (re)started: samples count from %s", clock(a.stableFrom))})
		return nil
	case now.Sub(a.stableFrom) < a.cfg.MetricsWindow:
		a.record(Entry{Time: now, Kind: KindCollecting, Reason: fmt.Sprintf("collecting samples: %s of the %s metrics window", now.Sub(a.stableFrom).Round(time.Second), a.cfg.MetricsWindow)})
		return nil
	}
	return a.decide(now, o)
}

// trackRestarts starts the window again when the job restarted or changed
// shape by another hand than the autoscaler's (a failover, `weir job
// rescale`): samples from before describe another job.
func (a *Autoscaler) trackRestarts(now time.Time, o Observation) {
	shape := map[string]int32{}
	for _, u := range o.Units {
		shape[u.Name] = u.Parallelism
	}
	if a.awaitResume {
		// Whatever happens until the job runs (its restarts counted, a
		// failover during the rescale's own restart) is part of the
		// start: the samples count from the end of the stabilization
		// time after it.
		a.restarts, a.running = o.Restarts, o.Running
		if o.Running {
			a.awaitResume, a.seen = false, shape
			a.restart(now)
		}
		return
	}
	// The shape is tracked while the job runs: a stopped job shows none.
	reshaped := o.Running && !maps.Equal(shape, a.seen)
	restarted := o.Restarts != a.restarts
	stopped := a.running && !o.Running
	resumed := o.Running && !a.running
	if o.Running {
		a.seen = shape
	}
	a.restarts, a.running = o.Restarts, o.Running
	if !reshaped && !restarted && !stopped && !resumed {
		return
	}
	a.restart(now)
	why := "the job restarted"
	switch {
	case !o.Running:
		why = "the job is " + o.State
	case reshaped:
		why = "the job's parallelism changed"
	case resumed:
		why = "the job runs again"
	}
	a.record(Entry{Time: now, Kind: KindRestarted, Reason: why + ": samples start again after the stabilization time"})
}

func (a *Autoscaler) restart(now time.Time) {
	a.samples = nil
	a.stableFrom = now.Add(a.cfg.Stabilization)
	clear(a.downSince)
}

// sampleable says whether o describes a job at work: running, with every
// subtask's load reported.
func (a *Autoscaler) sampleable(o Observation) (bool, string) {
	if !o.Running {
		return false, fmt.Sprintf("the job is %s", o.State)
	}
	if len(o.Units) == 0 {
		return false, "the job has no vertices"
	}
	for _, u := range o.Units {
		if u.Reporting < u.Parallelism {
			return false, fmt.Sprintf("%d of %d subtasks of %s reported their load", u.Reporting, u.Parallelism, u.Name)
		}
	}
	return true, ""
}

// trim drops samples older than the window and rescales older than an
// hour.
func (a *Autoscaler) trim(now time.Time) {
	i := 0
	for i < len(a.samples) && now.Sub(a.samples[i].at) > a.cfg.MetricsWindow {
		i++
	}
	a.samples = a.samples[i:]
	j := 0
	for j < len(a.rescales) && now.Sub(a.rescales[j]) >= time.Hour {
		j++
	}
	a.rescales = a.rescales[j:]
}

// decide evaluates the window and chooses.
func (a *Autoscaler) decide(now time.Time, o Observation) *Decision {
	evals := evaluate(a.cfg, a.samples)
	if evals == nil {
		a.record(Entry{Time: now, Kind: KindWaiting, Reason: "no samples in the metrics window"})
		return nil
	}
	var changed, deferred []string
	for i := range evals {
		e := &evals[i]
		switch {
		case e.Recommended < e.Parallelism:
			since, ok := a.downSince[e.Vertex]
			if !ok {
				since = now
				a.downSince[e.Vertex] = now
			}
			if due := since.Add(a.cfg.ScaleDownDelay); now.Before(due) {
				e.Chosen = e.Parallelism
				deferred = append(deferred, fmt.Sprintf("%s %d → %d at %s", e.Vertex, e.Parallelism, e.Recommended, clock(due)))
				continue
			}
			e.Chosen = e.Recommended
			changed = append(changed, e.Vertex)
		case e.Recommended > e.Parallelism:
			delete(a.downSince, e.Vertex)
			e.Chosen = e.Recommended
			changed = append(changed, e.Vertex)
		default:
			delete(a.downSince, e.Vertex)
			e.Chosen = e.Parallelism
		}
	}
	entry := Entry{Time: now, Evaluations: evals}
	if len(changed) == 0 {
		if len(deferred) > 0 {
			entry.Kind, entry.Reason = KindDeferred, "scale-down delay: "+strings.Join(deferred, "; ")
		} else {
			entry.Kind, entry.Reason = KindNoChange, noChange(evals)
		}
		a.record(entry)
		return nil
	}
	var steps []string
	for _, e := range evals {
		if e.Chosen != e.Parallelism {
			steps = append(steps, fmt.Sprintf("%s %d → %d (%s)", e.Vertex, e.Parallelism, e.Chosen, e.Reason))
		}
	}
	if need := slotsNeeded(o.Units, evals); need > o.Slots {
		entry.Kind = KindNoSlots
		entry.Reason = fmt.Sprintf("would rescale %s, but that needs %d slots and the job can have %d", strings.Join(steps, "; "), need, o.Slots)
		a.record(entry)
		return nil
	}
	if a.cfg.MaxRescalesPerHour > 0 && len(a.rescales) >= a.cfg.MaxRescalesPerHour {
		entry.Kind = KindLimited
		entry.Reason = fmt.Sprintf("would rescale %s, but %d rescales in the past hour reach max-rescales-per-hour; the next is allowed at %s",
			strings.Join(steps, "; "), len(a.rescales), clock(a.rescales[0].Add(time.Hour)))
		a.record(entry)
		return nil
	}
	d := &Decision{Parallelism: map[string]int32{}, From: map[string]int32{}, Reason: strings.Join(steps, "; ")}
	for _, u := range o.Units {
		for _, v := range u.Vertices {
			d.From[v] = u.Parallelism
		}
		for _, e := range evals {
			if e.Vertex == u.Name && e.Chosen != e.Parallelism {
				for _, v := range u.Vertices {
					d.Parallelism[v] = e.Chosen
				}
			}
		}
	}
	entry.Kind, entry.Reason = KindRescale, d.Reason
	entry.Parallelism = maps.Clone(d.Parallelism)
	a.record(entry)
	a.pending = d
	return d
}

// noChange says why no unit changes: within its target utilization, or
// held at a bound.
func noChange(evals []Evaluation) string {
	var held []string
	for _, e := range evals {
		if !e.Within {
			held = append(held, fmt.Sprintf("%s stays at %d: %s", e.Vertex, e.Parallelism, e.Reason))
		}
	}
	if len(held) == 0 {
		return "every vertex is within its target utilization"
	}
	return strings.Join(held, "; ")
}

// slotsNeeded is the slots the job needs at the chosen parallelisms: per
// slot-sharing group, its largest parallelism.
func slotsNeeded(units []Unit, evals []Evaluation) int {
	chosen := map[string]int32{}
	for _, e := range evals {
		chosen[e.Vertex] = e.Chosen
	}
	groups := map[string]int32{}
	for _, u := range units {
		p := u.Parallelism
		if c, ok := chosen[u.Name]; ok {
			p = c
		}
		groups[u.SlotSharingGroup] = max(groups[u.SlotSharingGroup], p)
	}
	n := 0
	for _, p := range groups {
		n += int(p)
	}
	return n
}

// Rescaled reports that the driver carried out d: the job runs at its new
// parallelism, and its samples start again after the stabilization time.
func (a *Autoscaler) Rescaled(now time.Time, d Decision) {
	a.pending = nil
	a.rescales = append(a.rescales, now)
	a.restart(now)
	// The restart and new shape the next observations show are this
	// rescale's own, not news.
	a.awaitResume = true
	a.lastEval = now
	a.record(Entry{Time: now, Kind: KindRescaled, Reason: d.Reason, Parallelism: maps.Clone(d.Parallelism)})
}

// RescaleFailed reports that the driver could not carry out d; the
// autoscaler decides again at its next interval.
func (a *Autoscaler) RescaleFailed(now time.Time, d Decision, err error) {
	a.pending = nil
	a.lastEval = now
	a.record(Entry{Time: now, Kind: KindFailed, Reason: fmt.Sprintf("rescale %s failed: %v", d.Reason, err), Parallelism: maps.Clone(d.Parallelism)})
}

// record appends e, or folds it into the newest entry when both are the
// same kind of non-decision, so a quiet job keeps one entry.
func (a *Autoscaler) record(e Entry) {
	if n := len(a.history); n > 0 && a.history[n-1].Kind == e.Kind && e.Kind.repeats() {
		last := &a.history[n-1]
		last.Last, last.Repeats = e.Time, last.Repeats+1
		last.Reason, last.Evaluations = e.Reason, e.Evaluations
		return
	}
	if len(a.history) == historyLimit {
		a.history = slices.Delete(a.history, 0, 1)
	}
	a.history = append(a.history, e)
}

// clock prints a time of day for reasons.
func clock(t time.Time) string { return t.UTC().Format("15:04:05") }
