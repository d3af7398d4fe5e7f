package operators

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// fakeClock is a manually advanced clock for the source's rate limiter.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock                  { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func (c *fakeClock) now() time.Time             { return c.t }
func (c *fakeClock) advance(d time.Duration)    { c.t = c.t.Add(d) }
func (c *fakeClock) since(t0 time.Time) float64 { return c.t.Sub(t0).Seconds() }

type sourceSubtask struct {
	ctx *testCtx
	src *SequenceSource
	out collector
}

func seqConfig(count, keys int64, rate float64) sdk.Config {
	// Numbers come from JSON/YAML as float64, like the job spec gives them.
	return sdk.Config{"count": float64(count), "keys": float64(keys), "rate": rate}
}

func openSource(t *testing.T, ctx *testCtx, clock *fakeClock) *sourceSubtask {
	t.Helper()
	s := &SequenceSource{}
	if clock != nil {
		s.now = clock.now
	}
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open sequence-source subtask %d: %v", ctx.subtask, err)
	}
	return &sourceSubtask{ctx: ctx, src: s}
}

// emit calls Emit once and checks what every call must satisfy.
func (s *sourceSubtask) emit(t *testing.T) (sdk.SourceStatus, []sdk.Record) {
	t.Helper()
	st, err := s.src.Emit(&s.out)
	if err != nil {
		t.Fatalf("subtask %d: Emit: %v", s.ctx.subtask, err)
	}
	recs := s.out.take()
	if len(recs) > maxPerEmit {
		t.Fatalf("subtask %d: one Emit produced %d records, more than %d", s.ctx.subtask, len(recs), maxPerEmit)
	}
	if st.Backoff < 0 || (st.Backoff > 0 && (len(recs) > 0 || st.EndOfInput)) {
		t.Fatalf("subtask %d: Emit returned %+v with %d records", s.ctx.subtask, st, len(recs))
	}
	return st, recs
}

// drain emits until the end of input and returns the values emitted.
func (s *sourceSubtask) drain(t *testing.T) []int64 {
	t.Helper()
	var out []int64
	for range 100000 {
		st, recs := s.emit(t)
		out = append(out, values(t, s.src.keys, recs)...)
		if st.EndOfInput {
			return out
		}
	}
	t.Fatalf("subtask %d: no end of input", s.ctx.subtask)
	return nil
}

// values checks each record's key against its value and returns the values.
func values(t *testing.T, keys int64, recs []sdk.Record) []int64 {
	t.Helper()
	out := make([]int64, 0, len(recs))
	for _, r := range recs {
		i, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			t.Fatalf("value %q: %v", r.Value, err)
		}
		if want := strconv.FormatInt(i%keys, 10); string(r.Key) != want {
			t.Fatalf("record %d has key %q, want %q", i, r.Key, want)
		}
		out = append(out, i)
	}
	return out
}

// sequence is what subtask s of p must emit for count records.
func sequence(s, p int, count int64) []int64 {
	var out []int64
	for i := int64(s); i < count; i += int64(p) {
		out = append(out, i)
	}
	return out
}

func TestSequenceSourcePartition(t *testing.T) {
	tests := []struct {
		count, keys int64
		parallelism int
	}{
		{0 /* see TestSequenceSourceUnbounded */, 1, 1},
		{1, 1, 1},
		{10, 3, 1},
		{10, 3, 3},
		{7, 4, 8}, // more subtasks than records
		{2000, 16, 4},
		{5000, 7, 3}, // several Emit calls per subtask
	}
	for _, tc := range tests {
		if tc.count == 0 {
			continue
		}
		t.Run(fmt.Sprintf("count=%d keys=%d p=%d", tc.count, tc.keys, tc.parallelism), func(t *testing.T) {
			seen := make([]int, tc.count)
			for s := range tc.parallelism {
				src := openSource(t, newTestCtx("source", seqConfig(tc.count, tc.keys, 0), s, tc.parallelism), nil)
				got := src.drain(t)
				if want := sequence(s, tc.parallelism, tc.count); !slices.Equal(got, want) {
					t.Fatalf("subtask %d emitted %v, want %v", s, got, want)
				}
				for _, i := range got {
					seen[i]++
				}
				// Emit after the end stays at the end, emitting nothing.
				if st, recs := src.emit(t); !st.EndOfInput || len(recs) != 0 {
					t.Fatalf("subtask %d: Emit after end: %+v, %d records", s, st, len(recs))
				}
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("value %d emitted %d times across subtasks", i, n)
				}
			}
		})
	}
}

func TestSequenceSourceUnbounded(t *testing.T) {
	src := openSource(t, newTestCtx("source", sdk.Config{"keys": 5.0}, 1, 2), nil)
	var got []int64
	for range 3 {
		st, recs := src.emit(t)
		if st.EndOfInput || st.Backoff != 0 || len(recs) != maxPerEmit {
			t.Fatalf("unbounded Emit: %+v with %d records", st, len(recs))
		}
		got = append(got, values(t, 5, recs)...)
	}
	if want := sequence(1, 2, 2*3*maxPerEmit); !slices.Equal(got, want) {
		t.Fatalf("emitted %v…, want %v…", got[:5], want[:5])
	}
}

func TestSequenceSourceConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  sdk.Config
		want string
	}{
		{"negative count", sdk.Config{"count": -1.0}, "count >= 0"},
		{"zero keys", sdk.Config{"keys": 0.0}, "keys > 0"},
		{"negative rate", sdk.Config{"rate": -2.0}, "rate >= 0"},
		{"fractional count", sdk.Config{"count": 1.5}, `config "count"`},
		{"count not a number", sdk.Config{"count": "ten"}, `config "count"`},
		{"rate not a number", sdk.Config{"rate": "fast"}, `config "rate"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := (&SequenceSource{}).Open(newTestCtx("source", tc.cfg, 0, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// checkpointSources snapshots every subtask into checkpoint id.
func checkpointSources(t *testing.T, srcs []*sourceSubtask, root string, id int64) []*weirv1.SubtaskState {
	t.Helper()
	var prev []*weirv1.SubtaskState
	for _, s := range srcs {
		prev = append(prev, s.ctx.checkpoint(t, s.src, root, id))
	}
	return prev
}

// TestSequenceSourceRestoreAtAnyPoint checkpoints after every possible
// number of Emit calls (a rate-limited source emits a few records per call,
// so this covers every few records), keeps running past the checkpoint,
// "crashes" and restores: what preceded the checkpoint plus what the restored
// source emits is each subtask's sequence, without loss or duplicates.
func TestSequenceSourceRestoreAtAnyPoint(t *testing.T) {
	const (
		count = 60
		keys  = 7
		p     = 3
		rate  = 1000.0
	)
	cfg := seqConfig(count, keys, rate)
	// The clock advances 0..3 ms before each Emit: 0..3 records per call
	// (plus backoffs when nothing is due).
	step := func(clock *fakeClock, call int) { clock.advance(time.Duration(call%4) * time.Millisecond) }
	for cut := 0; cut <= 40; cut++ {
		t.Run(fmt.Sprint("cut after ", cut, " calls"), func(t *testing.T) {
			root := t.TempDir()
			clock := newFakeClock()
			srcs := make([]*sourceSubtask, p)
			before := make([][]int64, p)
			for s := range srcs {
				srcs[s] = openSource(t, newTestCtx("source", cfg, s, p), clock)
			}
			call := 0
			run := func(calls int, into [][]int64) {
				for range calls {
					step(clock, call)
					call++
					for s, src := range srcs {
						_, recs := src.emit(t)
						if into != nil {
							into[s] = append(into[s], values(t, keys, recs)...)
						}
					}
				}
			}
			run(cut, before)
			prev := checkpointSources(t, srcs, root, 1)
			run(5, nil) // emitted after the barrier, lost with the crash

			clock2 := newFakeClock()
			for s := range p {
				r := openSource(t, restoreTestCtx(t, "source", cfg, s, p, 1, 1, prev), clock2)
				var after []int64
				for range 10000 {
					clock2.advance(time.Millisecond)
					st, recs := r.emit(t)
					after = append(after, values(t, keys, recs)...)
					if st.EndOfInput {
						break
					}
				}
				got := append(slices.Clone(before[s]), after...)
				if want := sequence(s, p, count); !slices.Equal(got, want) {
					t.Fatalf("subtask %d: %v before the checkpoint + %v after the restore, want %v", s, before[s], after, want)
				}
			}
		})
	}
}

// Several failovers in a row, each from the latest checkpoint, with
// unlimited rate.
func TestSequenceSourceRestoreChained(t *testing.T) {
	const count, keys, p = 3000, 16, 2
	cfg := seqConfig(count, keys, 0)
	root := t.TempDir()
	srcs := []*sourceSubtask{
		openSource(t, newTestCtx("source", cfg, 0, p), nil),
		openSource(t, newTestCtx("source", cfg, 1, p), nil),
	}
	got := make([][]int64, p)
	for id := int64(1); ; id++ {
		ended := true
		for s, src := range srcs {
			st, recs := src.emit(t)
			got[s] = append(got[s], values(t, keys, recs)...)
			ended = ended && st.EndOfInput
		}
		prev := checkpointSources(t, srcs, root, id)
		if ended {
			break
		}
		for _, src := range srcs {
			src.emit(t) // lost
		}
		for s := range srcs {
			srcs[s] = openSource(t, restoreTestCtx(t, "source", cfg, s, p, int(id), id, prev), nil)
		}
	}
	for s := range p {
		if want := sequence(s, p, count); !slices.Equal(got[s], want) {
			t.Fatalf("subtask %d emitted %d records, want %d in sequence", s, len(got[s]), len(want))
		}
	}
}

func TestSequenceSourceRateLimit(t *testing.T) {
	for _, rate := range []float64{0.5, 3, 4, 10, 1000, 7919.3, 100000} {
		t.Run(fmt.Sprint("rate=", rate), func(t *testing.T) {
			clock := newFakeClock()
			src := openSource(t, newTestCtx("source", seqConfig(0, 4, rate), 0, 1), clock)
			start := clock.now()
			// allowed is how many records may have gone out by now: one at
			// the start and one more every 1/rate.
			allowed := func() int64 { return int64(clock.since(start)*rate) + 1 }
			var emitted int64
			var waited bool // the previous call asked for a backoff we then waited
			end := start.Add(20 * time.Second)
			for calls := 0; clock.now().Before(end); calls++ {
				st, recs := src.emit(t)
				emitted += int64(len(recs))
				if emitted > allowed() {
					t.Fatalf("at %v: emitted %d records, at most %d allowed", clock.now().Sub(start), emitted, allowed())
				}
				if len(recs) == 0 {
					if st.Backoff <= 0 {
						t.Fatalf("at %v: nothing emitted and no backoff", clock.now().Sub(start))
					}
					// Waiting exactly the backoff makes the next record due
					// (a float rounding may cost one more minimal backoff).
					if waited && st.Backoff > time.Millisecond {
						t.Fatalf("at %v: waited the backoff but asked for another %v", clock.now().Sub(start), st.Backoff)
					}
					if interval := time.Duration(float64(time.Second)/rate) + time.Microsecond; st.Backoff > max(interval, time.Millisecond) {
						t.Fatalf("at %v: backoff %v longer than the interval %v between records", clock.now().Sub(start), st.Backoff, interval)
					}
					clock.advance(st.Backoff)
					waited = true
					continue
				}
				waited = false
				if len(recs) < maxPerEmit && emitted != allowed() {
					t.Fatalf("at %v: emitted %d records, %d are due", clock.now().Sub(start), emitted, allowed())
				}
			}
			// Driven by its own backoffs the source keeps up with the rate
			// (the last backoff, at least 1ms, may end right at the end).
			if lo := int64(rate*(20-max(1/rate, 0.001))) - 1; emitted < lo {
				t.Fatalf("emitted %d records in 20s at rate %v, want at least %d", emitted, rate, lo)
			}
		})
	}
}

func TestSequenceSourceRateLimitSchedule(t *testing.T) {
	clock := newFakeClock()
	src := openSource(t, newTestCtx("source", seqConfig(0, 4, 4), 0, 1), clock)
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
		{200 * time.Second, maxPerEmit, 0}, // t=210.25s: a backlog of 800 goes out in bounded bursts
		{0, 800 - maxPerEmit, 0},
		{0, 0, 250 * time.Millisecond},
	}
	for i, s := range steps {
		clock.advance(s.advance)
		st, recs := src.emit(t)
		if len(recs) != s.records || st.Backoff != s.backoff {
			t.Fatalf("step %d: %d records, backoff %v; want %d, %v", i, len(recs), st.Backoff, s.records, s.backoff)
		}
	}
}

func positionItem(sub, par, next uint64) []byte {
	it := make([]byte, 24)
	binary.BigEndian.PutUint64(it, sub)
	binary.BigEndian.PutUint64(it[8:], par)
	binary.BigEndian.PutUint64(it[16:], next)
	return it
}

func TestSequenceSourceCorruptPosition(t *testing.T) {
	tests := []struct {
		name string
		item []byte
	}{
		{"empty", nil},
		{"short", []byte{1, 2, 3, 4, 5}},
		{"16 bytes", make([]byte, 16)},
		{"long", make([]byte, 25)},
		{"next of another subtask", positionItem(1, 2, 4)},
		{"negative next", positionItem(1, 2, 1<<63|1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := newTestCtx("source", seqConfig(10, 2, 0), 1, 2)
			ctx.heap.ListState("position", false).Update([][]byte{tc.item})
			err := (&SequenceSource{}).Open(ctx)
			if err == nil || !strings.Contains(err.Error(), "corrupt position state") {
				t.Fatalf("Open: %v, want a corrupt position state error", err)
			}
		})
	}
}

// A restore at another parallelism hands the splits to the new subtasks:
// what was emitted before the checkpoint plus what the new subtasks emit
// after it is [0, count), each value once.
func TestSequenceSourceRescales(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{2, 3}, {3, 2}, {1, 2}, {2, 1}, {4, 2}, {2, 4}, {3, 3}, {2, 5}} {
		t.Run(fmt.Sprintf("%d to %d", tc.from, tc.to), func(t *testing.T) {
			const count = 3000
			root := t.TempDir()
			cfg := seqConfig(count, 4, 0)
			seen := map[int64]int{}
			var srcs []*sourceSubtask
			for s := range tc.from {
				src := openSource(t, newTestCtx("source", cfg, s, tc.from), nil)
				_, recs := src.emit(t)
				for _, v := range values(t, 4, recs) {
					seen[v]++
				}
				srcs = append(srcs, src)
			}
			prev := checkpointSources(t, srcs, root, 1)
			for s := range tc.to {
				src := openSource(t, restoreTestCtx(t, "source", cfg, s, tc.to, 1, 1, prev), nil)
				for _, v := range src.drain(t) {
					seen[v]++
				}
			}
			for v := int64(0); v < count; v++ {
				if seen[v] != 1 {
					t.Fatalf("value %d emitted %d times", v, seen[v])
				}
			}
			if len(seen) != count {
				t.Fatalf("%d distinct values, want %d", len(seen), count)
			}
		})
	}
}
