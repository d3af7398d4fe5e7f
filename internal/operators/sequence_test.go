package operators

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/internal/splitsource"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// The splits, their state and the rate limit are splitsource's, tested
// there; these tests are of what sequence-source makes of them.

const maxPerEmit = splitsource.MaxPerEmit

type sourceSubtask struct {
	ctx *testCtx
	src *SequenceSource
	out collector
}

func seqConfig(count, keys int64, rate float64) sdk.Config {
	// Numbers come from JSON/YAML as float64, like the job spec gives them.
	return sdk.Config{"count": float64(count), "keys": float64(keys), "rate": rate}
}

func openSource(t *testing.T, ctx *testCtx, clock *sdktest.Clock) *sourceSubtask {
	t.Helper()
	s := &SequenceSource{}
	if clock != nil {
		s.reader.Now = clock.Now
	}
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open sequence-source subtask %d: %v", ctx.SubtaskIndex(), err)
	}
	return &sourceSubtask{ctx: ctx, src: s}
}

// emit calls Emit once and checks what every call must satisfy.
func (s *sourceSubtask) emit(t *testing.T) (sdk.SourceStatus, []sdk.Record) {
	t.Helper()
	st, err := s.src.Emit(&s.out)
	if err != nil {
		t.Fatalf("subtask %d: Emit: %v", s.ctx.SubtaskIndex(), err)
	}
	recs := s.out.take()
	if len(recs) > maxPerEmit {
		t.Fatalf("subtask %d: one Emit produced %d records, more than %d", s.ctx.SubtaskIndex(), len(recs), maxPerEmit)
	}
	if st.Backoff < 0 || (st.Backoff > 0 && (len(recs) > 0 || st.EndOfInput)) {
		t.Fatalf("subtask %d: Emit returned %+v with %d records", s.ctx.SubtaskIndex(), st, len(recs))
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
	t.Fatalf("subtask %d: no end of input", s.ctx.SubtaskIndex())
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
		prev = append(prev, s.ctx.Checkpoint(t, s.src, root, id))
	}
	return prev
}

// The rate is per subtask: each of 2 subtasks at rate 4 emits one record
// at the start and the next 250ms later.
func TestSequenceSourceRate(t *testing.T) {
	clock := sdktest.NewClock()
	for sub := range 2 {
		src := openSource(t, newTestCtx("source", seqConfig(0, 4, 4), sub, 2), clock)
		if _, recs := src.emit(t); len(recs) != 1 {
			t.Fatalf("subtask %d: %d records at the start, want 1", sub, len(recs))
		}
		if st, recs := src.emit(t); len(recs) != 0 || st.Backoff != 250*time.Millisecond {
			t.Fatalf("subtask %d: %d records, backoff %v; want none and 250ms", sub, len(recs), st.Backoff)
		}
	}
}

func TestSequenceSourceCorruptPosition(t *testing.T) {
	ctx := newTestCtx("source", seqConfig(10, 2, 0), 1, 2)
	ctx.Heap.ListState("position", false).Update([][]byte{{1, 2, 3, 4, 5}})
	err := (&SequenceSource{}).Open(ctx)
	if err == nil || !strings.Contains(err.Error(), "sequence-source: corrupt position state") {
		t.Fatalf("Open: %v, want a corrupt position state error", err)
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

// Each split of the sequence is a split of the watermark, released once
// read to its end.
func TestSequenceSourceSplits(t *testing.T) {
	src := &SequenceSource{}
	if err := src.Open(newTestCtx("source", seqConfig(10, 2, 0), 1, 2)); err != nil {
		t.Fatal(err)
	}
	var out sdktest.SplitOutput
	if st, err := src.Emit(&out); err != nil || !st.EndOfInput {
		t.Fatalf("Emit: %+v, %v", st, err)
	}
	want := []string{"sequence-1-of-2"}
	if !slices.Equal(out.Opened, want) || !slices.Equal(out.Released, want) || len(out.Records) != 5 {
		t.Fatalf("opened %v, released %v, %d records; want %v twice, 5 records", out.Opened, out.Released, len(out.Records), want)
	}
	for i, sp := range out.Splits {
		if sp != want[0] {
			t.Fatalf("record %d went to %q", i, sp)
		}
	}
}

// Make makes the records, given the number and its event time.
func TestSequenceSourceMake(t *testing.T) {
	cfg := seqConfig(6, 2, 0)
	cfg["event-time"] = map[string]any{"step": "10ms", "jitter": "20ms"}
	var got []string
	src := &SequenceSource{Make: func(i, ts int64) sdk.Record {
		got = append(got, fmt.Sprintf("%d@%d", i, ts))
		return sdk.Record{}
	}}
	if err := src.Open(newTestCtx("source", cfg, 0, 1)); err != nil {
		t.Fatal(err)
	}
	var out collector
	if st, err := src.Emit(&out); err != nil || !st.EndOfInput || len(out.records) != 6 {
		t.Fatalf("Emit: %+v, %v, %d records", st, err, len(out.records))
	}
	// Timestamps i*10 − (i mod 3)*10.
	if want := []string{"0@0", "1@0", "2@0", "3@30", "4@30", "5@30"}; !slices.Equal(got, want) {
		t.Fatalf("Make got %v, want %v", got, want)
	}
}
