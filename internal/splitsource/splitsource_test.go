package splitsource

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// source is the least a source over a Reader is: record i carries i as its
// timestamp, so the tests see which numbers were read.
type source struct{ r Reader }

func (s *source) SnapshotState(int64) error {
	s.r.Snapshot()
	return nil
}

func number(i int64, out sdk.Collector) { out.Collect(sdk.Record{Timestamp: i}) }

// subtask is one subtask of a source and what it emitted.
type subtask struct {
	ctx   *sdktest.Context
	src   *source
	count int64
	out   sdktest.SplitOutput
	// splits are the first and stride of the split ids seen.
	splits map[string][2]int64
}

func open(t *testing.T, ctx *sdktest.Context, count, nsplits int64, rate float64, clock *sdktest.Clock) *subtask {
	t.Helper()
	s := &source{}
	if clock != nil {
		s.r.Now = clock.Now
	}
	if err := s.r.Open(ctx, "test", count, nsplits); err != nil {
		t.Fatalf("open subtask %d: %v", ctx.SubtaskIndex(), err)
	}
	s.r.SetRate(rate)
	return &subtask{ctx: ctx, src: s, count: count, splits: map[string][2]int64{}}
}

// emit calls Emit once, checks what every call must satisfy, and returns
// the numbers emitted.
func (s *subtask) emit(t *testing.T) (sdk.SourceStatus, []int64) {
	t.Helper()
	st := s.src.r.Emit(&s.out, number)
	recs, splits := s.out.Take()
	if len(recs) > MaxPerEmit {
		t.Fatalf("subtask %d: one Emit produced %d records, more than %d", s.ctx.SubtaskIndex(), len(recs), MaxPerEmit)
	}
	if st.Backoff < 0 || (st.Backoff > 0 && (len(recs) > 0 || st.EndOfInput)) {
		t.Fatalf("subtask %d: Emit returned %+v with %d records", s.ctx.SubtaskIndex(), st, len(recs))
	}
	ns := make([]int64, len(recs))
	for k, r := range recs {
		n := r.Timestamp
		sp, ok := s.splits[splits[k]]
		if !ok {
			if _, err := fmt.Sscanf(splits[k], "test-%d-of-%d", &sp[0], &sp[1]); err != nil {
				t.Fatalf("subtask %d: record %d went to split %q", s.ctx.SubtaskIndex(), n, splits[k])
			}
			s.splits[splits[k]] = sp
		}
		if n%sp[1] != sp[0] {
			t.Fatalf("subtask %d: record %d went to split %q", s.ctx.SubtaskIndex(), n, splits[k])
		}
		ns[k] = n
	}
	// A split is released once read to its end, not before.
	for _, id := range s.out.Released {
		if n, ok := s.src.r.nextOf(id); !ok || n < s.count {
			t.Fatalf("subtask %d: split %s released at %d of %d", s.ctx.SubtaskIndex(), id, n, s.count)
		}
	}
	return st, ns
}

// nextOf is the next record of split id; false when the reader does not
// hold it.
func (r *Reader) nextOf(id string) (int64, bool) {
	for _, sp := range r.splits {
		if r.id(sp) == id {
			return sp.next, true
		}
	}
	return 0, false
}

// drain emits until the end of input and returns the numbers emitted.
func (s *subtask) drain(t *testing.T, clock *sdktest.Clock) []int64 {
	t.Helper()
	var all []int64
	for range 100000 {
		if clock != nil {
			clock.Advance(time.Millisecond)
		}
		st, ns := s.emit(t)
		all = append(all, ns...)
		if st.EndOfInput {
			// Emit after the end emits nothing: it says so again, or
			// (rate-limited) asks for a backoff first.
			if st, ns := s.emit(t); len(ns) != 0 || (!st.EndOfInput && st.Backoff == 0) {
				t.Fatalf("subtask %d: Emit after the end: %+v, %d records", s.ctx.SubtaskIndex(), st, len(ns))
			}
			// Every split opened is released, once.
			opened, released := slices.Sorted(slices.Values(s.out.Opened)), slices.Sorted(slices.Values(s.out.Released))
			if !slices.Equal(opened, released) {
				t.Fatalf("subtask %d: opened splits %v, released %v", s.ctx.SubtaskIndex(), opened, released)
			}
			return all
		}
	}
	t.Fatalf("subtask %d: no end of input", s.ctx.SubtaskIndex())
	return nil
}

// splitRecords is what split first of stride holds of [0, count).
func splitRecords(first, stride, count int64) []int64 {
	var out []int64
	for n := first; n < count; n += stride {
		out = append(out, n)
	}
	return out
}

// checkSplits checks that all holds every record of [0, count) once and
// each split's records in order.
func checkSplits(t *testing.T, all []int64, count, nsplits int64) {
	t.Helper()
	for f := range nsplits {
		var got []int64
		for _, n := range all {
			if n%nsplits == f {
				got = append(got, n)
			}
		}
		if want := splitRecords(f, nsplits, count); !slices.Equal(got, want) {
			t.Fatalf("split %d: %v, want %v", f, got, want)
		}
	}
}

func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		count, nsplits int64
		p              int
	}{
		{1, 1, 1}, {10, 1, 1}, {10, 3, 3}, {2000, 4, 4},
		{7, 8, 8},    // more splits than records
		{1000, 5, 2}, // more splits than subtasks
		{3000, 1, 2}, // more subtasks than splits
		{5000, 3, 3}, // several Emit calls per subtask
	} {
		t.Run(fmt.Sprintf("count=%d splits=%d p=%d", tc.count, tc.nsplits, tc.p), func(t *testing.T) {
			var all []int64
			for s := range tc.p {
				sub := open(t, sdktest.NewContext("source", nil, s, tc.p), tc.count, tc.nsplits, 0, nil)
				all = append(all, sub.drain(t, nil)...)
				// Subtask s reads splits s, s+p, …; a split without
				// records is not a split of the watermark.
				var want []string
				for f := int64(s); f < tc.nsplits; f += int64(tc.p) {
					if f < tc.count {
						want = append(want, fmt.Sprintf("test-%d-of-%d", f, tc.nsplits))
					}
				}
				if !slices.Equal(sub.out.Opened, want) {
					t.Fatalf("subtask %d opened splits %v, want %v", s, sub.out.Opened, want)
				}
			}
			checkSplits(t, all, tc.count, tc.nsplits)
		})
	}
}

// An unbounded stream never ends, and its splits take turns record by
// record across Emit calls too (MaxPerEmit is no multiple of the splits).
func TestUnbounded(t *testing.T) {
	for _, tc := range []struct {
		nsplits int64
		p, s    int
	}{{1, 1, 0}, {3, 1, 0}, {5, 2, 1}} {
		sub := open(t, sdktest.NewContext("source", nil, tc.s, tc.p), 0, tc.nsplits, 0, nil)
		var got []int64
		for range 3 {
			st, ns := sub.emit(t)
			if st != (sdk.SourceStatus{}) || len(ns) != MaxPerEmit {
				t.Fatalf("unbounded Emit: %+v with %d records", st, len(ns))
			}
			got = append(got, ns...)
		}
		// Taking turns, the splits of the subtask read their numbers in
		// increasing order.
		var want []int64
		for n := int64(0); len(want) < len(got); n++ {
			if int(n%tc.nsplits)%tc.p == tc.s {
				want = append(want, n)
			}
		}
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("splits %d, subtask %d of %d: record %d is %d, want %d", tc.nsplits, tc.s, tc.p, k, got[k], want[k])
			}
		}
		if len(sub.out.Released) != 0 {
			t.Fatalf("released %v", sub.out.Released)
		}
	}
}

// Without an sdk.SourceOutput, every record goes to the output itself.
func TestPlainCollector(t *testing.T) {
	r := &Reader{}
	if err := r.Open(sdktest.NewContext("source", nil, 0, 1), "test", 10, 3); err != nil {
		t.Fatal(err)
	}
	var got []int64
	out := collectorFunc(func(rec sdk.Record) { got = append(got, rec.Timestamp) })
	if st := r.Emit(out, number); !st.EndOfInput {
		t.Fatalf("Emit: %+v", st)
	}
	if want := splitRecords(0, 1, 10); !slices.Equal(got, want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
}

type collectorFunc func(sdk.Record)

func (f collectorFunc) Collect(r sdk.Record) { f(r) }

func checkpoint(t *testing.T, subs []*subtask, root string, id int64) []*weirv1.SubtaskState {
	t.Helper()
	var prev []*weirv1.SubtaskState
	for _, s := range subs {
		prev = append(prev, s.ctx.Checkpoint(t, s.src, root, id))
	}
	return prev
}

// A checkpoint after every possible number of rate-limited Emit calls (a
// few records per call, so every few records), more records emitted after
// it and lost with a crash, and a restore at the same or another
// parallelism: what preceded the checkpoint plus what the restored
// subtasks emit is every record once, each split in order.
func TestRestore(t *testing.T) {
	const count, rate = 120, 1000.0
	for _, tc := range []struct {
		from, to int
		nsplits  int64
	}{{3, 3, 3}, {2, 3, 2}, {3, 2, 3}, {2, 4, 2}, {4, 2, 4}, {1, 4, 6}, {4, 1, 6}, {2, 8, 6}} {
		for cut := 0; cut <= 40; cut += 2 {
			t.Run(fmt.Sprintf("%d to %d splits %d cut %d", tc.from, tc.to, tc.nsplits, cut), func(t *testing.T) {
				root := t.TempDir()
				clock := sdktest.NewClock()
				var subs []*subtask
				for s := range tc.from {
					subs = append(subs, open(t, sdktest.NewContext("source", nil, s, tc.from), count, tc.nsplits, rate, clock))
				}
				var before []int64
				run := func(calls int, keep bool) {
					for c := range calls {
						// 0..3 records per call, and backoffs when none
						// is due.
						clock.Advance(time.Duration(c%4) * time.Millisecond)
						for _, s := range subs {
							_, ns := s.emit(t)
							if keep {
								before = append(before, ns...)
							}
						}
					}
				}
				run(cut, true)
				prev := checkpoint(t, subs, root, 1)
				run(5, false)

				clock2 := sdktest.NewClock()
				var after []int64
				for s := range tc.to {
					r := open(t, sdktest.Restore(t, "source", nil, s, tc.to, 1, 1, prev), count, tc.nsplits, rate, clock2)
					after = append(after, r.drain(t, clock2)...)
				}
				checkSplits(t, append(slices.Clone(before), after...), count, tc.nsplits)
			})
		}
	}
}

// Several failovers in a row, each from the latest checkpoint, rescaling
// each time.
func TestRestoreChained(t *testing.T) {
	const count, nsplits = 5000, 4
	root := t.TempDir()
	ps := []int{2, 3, 1, 4, 2}
	var subs []*subtask
	for s := range ps[0] {
		subs = append(subs, open(t, sdktest.NewContext("source", nil, s, ps[0]), count, nsplits, 0, nil))
	}
	var all []int64
	for id := int64(1); ; id++ {
		ended := true
		for _, s := range subs {
			st, ns := s.emit(t)
			all = append(all, ns...)
			ended = ended && st.EndOfInput
		}
		prev := checkpoint(t, subs, root, id)
		if ended {
			break
		}
		for _, s := range subs {
			s.emit(t) // lost
		}
		p := ps[int(id)%len(ps)]
		subs = subs[:0]
		for s := range p {
			// The configured splits matter only to a first run.
			subs = append(subs, open(t, sdktest.Restore(t, "source", nil, s, p, int(id), id, prev), count, 99, 0, nil))
		}
	}
	checkSplits(t, all, count, nsplits)
}

func positionItem(first, stride, next uint64) []byte {
	it := make([]byte, 24)
	binary.BigEndian.PutUint64(it, first)
	binary.BigEndian.PutUint64(it[8:], stride)
	binary.BigEndian.PutUint64(it[16:], next)
	return it
}

// The state format is fixed, so that checkpoints stay restorable: one item
// per split, its first, stride and next as big-endian uint64s.
func TestStateFormat(t *testing.T) {
	ctx := sdktest.NewContext("source", nil, 1, 2)
	r := &Reader{}
	if err := r.Open(ctx, "test", 100, 4); err != nil {
		t.Fatal(err)
	}
	r.Emit(collectorFunc(func(sdk.Record) {}), number) // reads 1, 3, 5, …, 99
	r.Snapshot()
	want := [][]byte{positionItem(1, 4, 101), positionItem(3, 4, 103)}
	if got := ctx.ListState("position").Get(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("state %x, want %x", got, want)
	}

	ctx = sdktest.NewContext("source", nil, 0, 1)
	ctx.RestoredID = 1
	ctx.ListState("position").Update([][]byte{positionItem(2, 4, 10)})
	sub := open(t, ctx, 20, 4, 0, nil)
	if got, want := sub.drain(t, nil), []int64{10, 14, 18}; !slices.Equal(got, want) {
		t.Fatalf("restored split emitted %v, want %v", got, want)
	}
}

// A restored subtask may hold no split: it has nothing to emit.
func TestRestoreWithoutSplits(t *testing.T) {
	ctx := sdktest.NewContext("source", nil, 0, 1)
	ctx.RestoredID = 1
	sub := open(t, ctx, 0, 4, 100, sdktest.NewClock())
	if st, ns := sub.emit(t); !st.EndOfInput || len(ns) != 0 {
		t.Fatalf("Emit: %+v, %d records", st, len(ns))
	}
	if got := sub.src.r.Share(100); got != 0 {
		t.Fatalf("Share = %v, want 0", got)
	}
	sub.src.r.Snapshot()
	if got := ctx.ListState("position").Get(); len(got) != 0 {
		t.Fatalf("state %x, want none", got)
	}
}

func TestCorruptPosition(t *testing.T) {
	for _, tc := range []struct {
		name string
		item []byte
	}{
		{"empty", nil},
		{"short", []byte{1, 2, 3, 4, 5}},
		{"16 bytes", make([]byte, 16)},
		{"23 bytes", make([]byte, 23)},
		{"long", make([]byte, 25)},
		{"zero stride", positionItem(0, 0, 0)},
		{"negative stride", positionItem(0, 1<<63, 0)},
		{"first beyond the stride", positionItem(3, 2, 5)},
		{"next before first", positionItem(1, 2, 0)},
		{"next of another split", positionItem(1, 2, 4)},
		{"negative next", positionItem(1, 2, 1<<63|1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := sdktest.NewContext("source", nil, 0, 1)
			ctx.RestoredID = 1
			ctx.ListState("position").Update([][]byte{positionItem(0, 2, 4), tc.item})
			err := (&Reader{}).Open(ctx, "test", 10, 2)
			if err == nil || !strings.HasPrefix(err.Error(), "test-source: corrupt position state") {
				t.Fatalf("Open: %v, want a corrupt position state error", err)
			}
		})
	}
}

// A subtask's share of a stream-wide rate is in proportion to the splits
// it reads, on a first run and after a restore at another parallelism.
func TestShare(t *testing.T) {
	const nsplits, rate = 6, 600.0
	root := t.TempDir()
	var subs []*subtask
	var got []float64
	for s := range 4 {
		sub := open(t, sdktest.NewContext("source", nil, s, 4), 0, nsplits, 0, nil)
		subs = append(subs, sub)
		got = append(got, sub.src.r.Share(rate))
	}
	if want := []float64{200, 200, 100, 100}; !slices.Equal(got, want) {
		t.Fatalf("shares %v, want %v", got, want)
	}
	prev := checkpoint(t, subs, root, 1)
	for _, p := range []int{1, 5, 8} {
		var sum float64
		for s := range p {
			sub := open(t, sdktest.Restore(t, "source", nil, s, p, 1, 1, prev), 0, nsplits, 0, nil)
			share := sub.src.r.Share(rate)
			if want := rate * float64(len(sub.src.r.splits)) / nsplits; share != want {
				t.Fatalf("p=%d subtask %d: share %v of %d splits, want %v", p, s, share, len(sub.src.r.splits), want)
			}
			sum += share
		}
		if sum != rate {
			t.Fatalf("p=%d: shares add up to %v, want %v", p, sum, rate)
		}
	}
}

func TestRateLimit(t *testing.T) {
	for _, rate := range []float64{0.5, 3, 4, 10, 1000, 7919.3, 100000} {
		t.Run(fmt.Sprint("rate=", rate), func(t *testing.T) {
			clock := sdktest.NewClock()
			sub := open(t, sdktest.NewContext("source", nil, 0, 1), 0, 1, rate, clock)
			start := clock.Now()
			since := func() float64 { return clock.Now().Sub(start).Seconds() }
			// allowed is how many records may have gone out by now: one at
			// the start and one more every 1/rate.
			allowed := func() int64 { return int64(since()*rate) + 1 }
			var emitted int64
			var waited bool // the previous call asked for a backoff we then waited
			end := start.Add(20 * time.Second)
			for clock.Now().Before(end) {
				st, ns := sub.emit(t)
				emitted += int64(len(ns))
				if emitted > allowed() {
					t.Fatalf("at %v: emitted %d records, at most %d allowed", clock.Now().Sub(start), emitted, allowed())
				}
				if len(ns) == 0 {
					if st.Backoff <= 0 {
						t.Fatalf("at %v: nothing emitted and no backoff", clock.Now().Sub(start))
					}
					// Waiting exactly the backoff makes the next record due
					// (a float rounding may cost one more minimal backoff).
					if waited && st.Backoff > time.Millisecond {
						t.Fatalf("at %v: waited the backoff but asked for another %v", clock.Now().Sub(start), st.Backoff)
					}
					if interval := time.Duration(float64(time.Second)/rate) + time.Microsecond; st.Backoff > max(interval, time.Millisecond) {
						t.Fatalf("at %v: backoff %v longer than the interval %v between records", clock.Now().Sub(start), st.Backoff, interval)
					}
					clock.Advance(st.Backoff)
					waited = true
					continue
				}
				waited = false
				if len(ns) < MaxPerEmit && emitted != allowed() {
					t.Fatalf("at %v: emitted %d records, %d are due", clock.Now().Sub(start), emitted, allowed())
				}
			}
			// Driven by its own backoffs the reader keeps up with the rate
			// (the last backoff, at least 1ms, may end right at the end).
			if lo := int64(rate*(20-max(1/rate, 0.001))) - 1; emitted < lo {
				t.Fatalf("emitted %d records in 20s at rate %v, want at least %d", emitted, rate, lo)
			}
		})
	}
}

func TestRateLimitSchedule(t *testing.T) {
	clock := sdktest.NewClock()
	sub := open(t, sdktest.NewContext("source", nil, 0, 1), 0, 1, 4, clock)
	steps := []struct {
		advance time.Duration
		records int
		backoff time.Duration
	}{
		{0, 1, 0},                      // one record right away
		{0, 0, 250 * time.Millisecond}, // ahead of schedule
		{100 * time.Millisecond, 0, 150 * time.Millisecond},
		{149 * time.Millisecond, 0, time.Millisecond},
		{time.Millisecond, 1, 0}, // t=250ms: the second record
		{0, 0, 250 * time.Millisecond},
		{10 * time.Second, 40, 0}, // t=10.25s: 42 due in all, 2 went out
		{0, 0, 250 * time.Millisecond},
		{200 * time.Second, MaxPerEmit, 0}, // t=210.25s: a backlog of 800 goes out in bounded bursts
		{0, 800 - MaxPerEmit, 0},
		{0, 0, 250 * time.Millisecond},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		st, ns := sub.emit(t)
		if len(ns) != s.records || st.Backoff != s.backoff {
			t.Fatalf("step %d: %d records, backoff %v; want %d, %v", i, len(ns), st.Backoff, s.records, s.backoff)
		}
	}
}
