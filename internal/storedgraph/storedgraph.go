// Package storedgraph follows whether the job graph in the HA store is
// the graph a job runs. A new leader recovers the stored graph, so each
// change the job makes to its graph (a rescale) must reach the store.
// One the store did not take in time is stored again in the background
// until it is taken, a later change is stored (the stored graph then
// holds this one too), or the job ends (its HA data goes, and must not
// come back).
//
// While the stored graph lags, the checkpoints the job completes are at
// a parallelism a new leader would not run: they must be restorable at
// the stored one too. That holds for keyed state and for most in-flight
// records, which are redistributed; not for a broadcast edge's, so such
// a job takes aligned checkpoints while it lags (see Lagging).
//
// A Tracker is not safe for concurrent use: the JobManager keeps it under
// the lock that serializes a job's graph changes.
package storedgraph

// Change names one change of the graph, in the order they were made.
type Change uint64

// Tracker follows one job's graph changes and what the store took.
type Tracker struct {
	// latest is the newest change begun; stored the newest the store
	// holds (the store then holds every change up to it).
	latest, stored Change
	ended          bool
}

// Begin marks a change about to be made: the stored graph lags from now
// on, before the change takes effect, so that no checkpoint of the
// changed job is taken as if it did not.
func (t *Tracker) Begin() Change {
	t.latest++
	return t.latest
}

// Abandon undoes Begin: the change was refused and never made.
func (t *Tracker) Abandon(c Change) {
	if c == t.latest && t.stored < c {
		t.latest--
	}
}

// Stored records that the store took change c (and so every earlier one).
func (t *Tracker) Stored(c Change) { t.stored = max(t.stored, c) }

// StoredCurrent records that the store took the graph the job runs now,
// with every change made so far (a checkpointing change stores it).
func (t *Tracker) StoredCurrent() { t.stored = t.latest }

// Retry reports whether change c, which the store did not take, must
// still be stored: it is the latest change, none stored since, and the
// job has not ended.
func (t *Tracker) Retry(c Change) bool {
	return !t.ended && c == t.latest && t.stored < c
}

// End records that the job ended and its HA data goes: nothing is stored
// for it any more.
func (t *Tracker) End() { t.ended = true }

// Lagging reports whether the store lacks a change the job made, or is
// making: a new leader would recover the job as it was before it.
func (t *Tracker) Lagging() bool { return !t.ended && t.stored < t.latest }
