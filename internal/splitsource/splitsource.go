// Package splitsource reads a stream of numbered records cut into splits,
// the machinery shared by the built-in sources that make their records
// from the record number (sequence-source, nexmark-source).
//
// The numbers 0, 1, … are cut into splits as Flink's sources are: with n
// splits, split s holds the arithmetic progression s, s+n, s+2n, … and on
// a first run subtask i of parallelism p reads splits i, i+p, … < n. Each
// split's position is an item of operator list state, so a restored
// source resumes every split exactly after the last record that preceded
// the checkpoint's barrier, and a restore at another parallelism hands the
// splits round-robin to the new subtasks (list state redistribution). A
// subtask reads its splits in turn, each into its own split of the
// watermark, so the watermark follows the slowest.
package splitsource

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/weirproject/weir/sdk"
)

// MaxPerEmit bounds one Emit call so checkpoints are not delayed behind it.
const MaxPerEmit = 512

// Reader reads the records 0..count (count 0: unbounded) of the splits a
// subtask holds, at an optional rate.
type Reader struct {
	// Now is the clock of the rate limit: time.Now when nil; tests drive a
	// fake clock.
	Now func() time.Time

	name     string // the source's name, in split ids and errors
	count    int64
	rate     float64 // records/s; 0: unlimited
	splits   []split
	cur      int // the split the last record came from
	position sdk.ListState
	// outs are the splits' outputs, made at the first Emit (Open has no
	// output to make them from).
	outs []sdk.Collector

	// rate limiting: records emitted since start at rate
	start   time.Time
	emitted int64
}

// split is the arithmetic progression first, first+stride, … of record
// numbers and the next one to read.
type split struct{ first, stride, next int64 }

func (sp split) done(count int64) bool { return count > 0 && sp.next >= count }

// positionSize is the size of a position state item: first, stride, next
// as big-endian uint64s.
const positionSize = 24

// Open restores the splits from ctx's list state "position" or, on a first
// run, takes this subtask's share of nsplits splits. Name is the source's,
// e.g. "sequence": its split ids are "sequence-<first>-of-<stride>" and
// its errors start "sequence-source:". The caller has checked count >= 0
// and nsplits > 0. A restored job keeps the splits of its state whatever
// nsplits is, since the positions are only meaningful for them.
func (r *Reader) Open(ctx sdk.Context, name string, count, nsplits int64) error {
	r.name, r.count = name, count
	r.position = ctx.ListState("position")
	items := r.position.Get()
	var splits []split
	if len(items) == 0 && ctx.RestoredCheckpointID() == 0 {
		p := int64(ctx.Parallelism())
		for f := int64(ctx.SubtaskIndex()); f < nsplits; f += p {
			splits = append(splits, split{first: f, stride: nsplits, next: f})
		}
	}
	// A restored subtask may get no split (more subtasks than splits): it
	// has nothing to read.
	for _, it := range items {
		if len(it) != positionSize {
			return fmt.Errorf("%s-source: corrupt position state (%d bytes)", name, len(it))
		}
		sp := split{
			first:  int64(binary.BigEndian.Uint64(it)),
			stride: int64(binary.BigEndian.Uint64(it[8:])),
			next:   int64(binary.BigEndian.Uint64(it[16:])),
		}
		if sp.stride <= 0 || sp.first < 0 || sp.first >= sp.stride || sp.next < sp.first || (sp.next-sp.first)%sp.stride != 0 {
			return fmt.Errorf("%s-source: corrupt position state (split %d/%d at %d)", name, sp.first, sp.stride, sp.next)
		}
		splits = append(splits, sp)
	}
	r.splits = splits
	r.cur = len(splits) - 1 // the first Emit starts at splits[0]
	return nil
}

// SetRate limits the reader to perSecond records/s (0: unlimited).
func (r *Reader) SetRate(perSecond float64) { r.rate = perSecond }

// Share is this reader's part of streamRate, a rate of the whole stream:
// streamRate × the splits it reads / all splits. A subtask's part thus
// follows the splits it was handed, so a rescaled job keeps the stream's
// rate. 0 without splits.
func (r *Reader) Share(streamRate float64) float64 {
	if len(r.splits) == 0 {
		return 0
	}
	// Every split of a job has the same stride: the number of splits.
	return streamRate * float64(len(r.splits)) / float64(r.splits[0].stride)
}

// Emit reads up to MaxPerEmit record numbers that are due at the rate,
// calling emit(i, split) for each, which collects record i (or nothing:
// a source may skip numbers) into split, its split's output: a split of
// out when out is an sdk.SourceOutput, which Emit releases once the split
// is read to its end. The splits take turns record by record,
// the turn carrying over from one call to the next.
func (r *Reader) Emit(out sdk.Collector, emit func(i int64, split sdk.Collector)) sdk.SourceStatus {
	n := int64(MaxPerEmit)
	if r.rate > 0 {
		clock := r.Now
		if clock == nil {
			clock = time.Now
		}
		now := clock()
		if r.start.IsZero() {
			r.start = now
		}
		// One record is due at the start and one more every 1/rate, so the
		// next one (number emitted+1) is due at emitted/rate.
		elapsed := now.Sub(r.start)
		due := int64(elapsed.Seconds()*r.rate) + 1 - r.emitted
		if due <= 0 {
			wait := time.Duration(math.Ceil(float64(r.emitted)/r.rate*float64(time.Second))) - elapsed
			return sdk.SourceStatus{Backoff: max(wait, time.Millisecond)}
		}
		n = min(n, due)
	}
	if r.outs == nil {
		r.openSplits(out)
	}
	for ; n > 0; n-- {
		sp := r.nextSplit()
		if sp == nil {
			return sdk.SourceStatus{EndOfInput: true}
		}
		emit(sp.next, r.outs[r.cur])
		sp.next += sp.stride
		r.emitted++
		if sp.done(r.count) {
			if so, ok := out.(sdk.SourceOutput); ok {
				so.ReleaseSplit(r.id(*sp))
			}
		}
	}
	if r.nextSplit() == nil {
		return sdk.SourceStatus{EndOfInput: true}
	}
	// nextSplit advanced cur; step back so the next call takes up the
	// round-robin where this one left it.
	r.cur = (r.cur + len(r.splits) - 1) % len(r.splits)
	return sdk.SourceStatus{}
}

// openSplits gives every split with records left its own output, so each
// is a split of the watermark (a finished one would hold it back forever).
func (r *Reader) openSplits(out sdk.Collector) {
	r.outs = make([]sdk.Collector, len(r.splits))
	so, ok := out.(sdk.SourceOutput)
	for i, sp := range r.splits {
		r.outs[i] = out
		if ok && !sp.done(r.count) {
			r.outs[i] = so.Split(r.id(sp))
		}
	}
}

func (r *Reader) id(sp split) string {
	return fmt.Sprintf("%s-%d-of-%d", r.name, sp.first, sp.stride)
}

// nextSplit moves to the next split with records left, round-robin; nil
// when every split is read to its end.
func (r *Reader) nextSplit() *split {
	for range r.splits {
		r.cur = (r.cur + 1) % len(r.splits)
		if sp := &r.splits[r.cur]; !sp.done(r.count) {
			return sp
		}
	}
	return nil
}

// Snapshot stores every split's position in the list state. Call it from
// the source's SnapshotState: the runtime calls that right after the
// barrier went out, so every record before the barrier is covered.
func (r *Reader) Snapshot() {
	items := make([][]byte, len(r.splits))
	for i, sp := range r.splits {
		it := make([]byte, positionSize)
		binary.BigEndian.PutUint64(it, uint64(sp.first))
		binary.BigEndian.PutUint64(it[8:], uint64(sp.stride))
		binary.BigEndian.PutUint64(it[16:], uint64(sp.next))
		items[i] = it
	}
	r.position.Update(items)
}
