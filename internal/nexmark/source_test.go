package nexmark

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// splitOutput is an sdk.SourceOutput recording which split each record
// went to.
type splitOutput struct {
	records  []sdk.Record
	splits   []string
	opened   []string
	released []string
}

func (o *splitOutput) Collect(r sdk.Record) {
	o.records = append(o.records, r)
	o.splits = append(o.splits, "")
}
func (o *splitOutput) Split(id string) sdk.Collector {
	o.opened = append(o.opened, id)
	return splitCollector{o, id}
}
func (o *splitOutput) ReleaseSplit(id string) { o.released = append(o.released, id) }

type splitCollector struct {
	o  *splitOutput
	id string
}

func (c splitCollector) Collect(r sdk.Record) {
	c.o.records = append(c.o.records, r)
	c.o.splits = append(c.o.splits, c.id)
}

type subtask struct {
	ctx *testCtx
	src *Source
	out splitOutput
}

func open(t *testing.T, ctx *testCtx, clock *fakeClock) *subtask {
	t.Helper()
	s := &Source{}
	if clock != nil {
		s.now = clock.now
	}
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open subtask %d: %v", ctx.subtask, err)
	}
	return &subtask{ctx: ctx, src: s}
}

// emit calls Emit once and returns the event numbers of what it emitted,
// checking each record against Generate.
func (s *subtask) emit(t *testing.T) (sdk.SourceStatus, []int64) {
	t.Helper()
	st, err := s.src.Emit(&s.out)
	if err != nil {
		t.Fatalf("subtask %d: Emit: %v", s.ctx.subtask, err)
	}
	if len(s.out.records) > maxPerEmit {
		t.Fatalf("one Emit made %d records", len(s.out.records))
	}
	if st.Backoff < 0 || (st.Backoff > 0 && (len(s.out.records) > 0 || st.EndOfInput)) {
		t.Fatalf("subtask %d: Emit returned %+v with %d records", s.ctx.subtask, st, len(s.out.records))
	}
	var ns []int64
	for i, r := range s.out.records {
		n := eventNumber(t, s.src.gen, r)
		if want := fmt.Sprintf("nexmark-%d-of-%d", n%s.src.splits[0].stride, s.src.splits[0].stride); s.out.splits[i] != want {
			t.Fatalf("event %d went to split %q, want %q", n, s.out.splits[i], want)
		}
		ns = append(ns, n)
	}
	s.out.records, s.out.splits = nil, nil
	return st, ns
}

func (s *subtask) drain(t *testing.T) []int64 {
	t.Helper()
	var all []int64
	for range 100000 {
		st, ns := s.emit(t)
		all = append(all, ns...)
		if st.EndOfInput {
			return all
		}
	}
	t.Fatal("no end of input")
	return nil
}

// eventNumber recovers the event number of a record from its timestamp
// (the test configs run at 1000 events/s, one per ms) and checks the
// record is exactly Generate's event.
func eventNumber(t *testing.T, gen Config, r sdk.Record) int64 {
	t.Helper()
	n := r.Timestamp - gen.BaseTime.UnixMilli()
	e, err := Decode(r.Value)
	if err != nil {
		t.Fatalf("record value: %v", err)
	}
	if want := Generate(gen, n); !reflect.DeepEqual(e, want) {
		t.Fatalf("record at %d is not event %d", r.Timestamp, n)
	}
	if string(r.Key) != e.Kind.String() {
		t.Fatalf("event %d (%v) has key %q", n, e.Kind, r.Key)
	}
	return n
}

func srcConfig(events int64, rate float64, splits int) sdk.Config {
	c := sdk.Config{"events": float64(events), "rate": rate, "first-event-rate": float64(1000),
		"base-time": "2025-06-01T12:00:00Z", "hot-auction-ratio": float64(3)}
	if splits > 0 {
		c["splits"] = float64(splits)
	}
	return c
}

// splitEvents is what a split of stride holds of [0, events).
func splitEvents(first, stride, events int64) []int64 {
	var out []int64
	for n := first; n < events; n += stride {
		out = append(out, n)
	}
	return out
}

func TestSourcePartition(t *testing.T) {
	for _, tc := range []struct {
		events int64
		p      int
		splits int
	}{{1, 1, 0}, {100, 1, 0}, {1000, 3, 0}, {1000, 2, 5}, {7, 4, 0}, {3000, 2, 1}, {5000, 3, 3}} {
		t.Run(fmt.Sprintf("events=%d p=%d splits=%d", tc.events, tc.p, tc.splits), func(t *testing.T) {
			seen := make([]int, tc.events)
			for s := range tc.p {
				sub := open(t, newTestCtx(srcConfig(tc.events, 0, tc.splits), s, tc.p), nil)
				got := sub.drain(t)
				stride := int64(tc.splits)
				if stride == 0 {
					stride = int64(tc.p)
				}
				// Per split, in order.
				for f := int64(s); f < stride; f += int64(tc.p) {
					var mine []int64
					for _, n := range got {
						if n%stride == f {
							mine = append(mine, n)
						}
					}
					if want := splitEvents(f, stride, tc.events); !slices.Equal(mine, want) {
						t.Fatalf("split %d: %v, want %v", f, mine, want)
					}
				}
				for _, n := range got {
					seen[n]++
				}
				if st, ns := sub.emit(t); !st.EndOfInput || len(ns) != 0 {
					t.Fatalf("Emit after the end: %+v, %d", st, len(ns))
				}
				if len(sub.out.released) != len(sub.out.opened) {
					t.Fatalf("opened splits %v, released %v", sub.out.opened, sub.out.released)
				}
			}
			for n, c := range seen {
				if c != 1 {
					t.Fatalf("event %d emitted %d times", n, c)
				}
			}
		})
	}
}

func TestSourceUnbounded(t *testing.T) {
	sub := open(t, newTestCtx(srcConfig(0, 0, 0), 0, 1), nil)
	var got []int64
	for range 10 {
		st, ns := sub.emit(t)
		if st.EndOfInput {
			t.Fatal("unbounded source ended")
		}
		got = append(got, ns...)
	}
	if !slices.Equal(got, splitEvents(0, 1, 10*maxPerEmit)) {
		t.Fatalf("unbounded source emitted %d events out of order", len(got))
	}
}

func TestSourceConfig(t *testing.T) {
	for _, cfg := range []sdk.Config{
		{"events": float64(-1)}, {"rate": float64(-1)}, {"splits": float64(0)},
		{"first-event-rate": float64(0)}, {"base-time": "yesterday"}, {"base-time": float64(3)},
		{"hot-auction-ratio": float64(0)}, {"hot-bidder-ratio": 1.5}, {"key": "auction"},
	} {
		if err := (&Source{}).Open(newTestCtx(cfg, 0, 1)); err == nil {
			t.Errorf("config %v: no error", cfg)
		}
	}
	// key: none and the defaults.
	sub := open(t, newTestCtx(sdk.Config{"events": float64(3), "key": "none"}, 0, 1), nil)
	if _, err := sub.src.Emit(&sub.out); err != nil {
		t.Fatal(err)
	}
	if len(sub.out.records) != 3 || sub.out.records[0].Key != nil || sub.out.records[2].Timestamp != DefaultBaseTime.UnixMilli() {
		t.Fatalf("records %+v", sub.out.records)
	}
}

func checkpoint(t *testing.T, subs []*subtask, root string, id int64) []*weirv1.SubtaskState {
	t.Helper()
	var prev []*weirv1.SubtaskState
	for _, s := range subs {
		prev = append(prev, s.ctx.checkpoint(t, s.src, root, id))
	}
	return prev
}

// A checkpoint after any number of rate-limited Emit calls, more events
// emitted after it and lost, and a restore at the same or another
// parallelism: what preceded the checkpoint plus what the restored
// subtasks emit is every event once, each split in order.
func TestSourceRestoreAndRescale(t *testing.T) {
	const events, splits, rate = 300, 6, 2000.0
	for _, tc := range []struct{ from, to int }{{3, 3}, {2, 3}, {3, 2}, {1, 4}, {4, 1}, {6, 6}, {2, 8}} {
		for cut := 0; cut <= 30; cut += 3 {
			t.Run(fmt.Sprintf("%d to %d cut %d", tc.from, tc.to, cut), func(t *testing.T) {
				cfg := srcConfig(events, rate, splits)
				root := t.TempDir()
				clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
				var subs []*subtask
				for s := range tc.from {
					subs = append(subs, open(t, newTestCtx(cfg, s, tc.from), clock))
				}
				var before []int64
				run := func(calls int, keep bool) {
					for c := range calls {
						clock.advance(time.Duration(c%4) * time.Millisecond)
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
				run(5, false) // after the barrier: lost with the crash

				clock2 := &fakeClock{t: time.Unix(1_800_000_000, 0)}
				var after []int64
				for s := range tc.to {
					r := open(t, restoreTestCtx(t, cfg, s, tc.to, 1, prev), clock2)
					for range 100000 {
						clock2.advance(time.Millisecond)
						st, ns := r.emit(t)
						after = append(after, ns...)
						if st.EndOfInput {
							break
						}
					}
				}
				all := append(slices.Clone(before), after...)
				for f := int64(0); f < splits; f++ {
					var got []int64
					for _, n := range all {
						if n%splits == f {
							got = append(got, n)
						}
					}
					if want := splitEvents(f, splits, events); !slices.Equal(got, want) {
						t.Fatalf("split %d: %v, want %v", f, got, want)
					}
				}
			})
		}
	}
}

// Several failovers in a row, each from the latest checkpoint, rescaling
// each time.
func TestSourceRestoreChained(t *testing.T) {
	const events = 5000
	cfg := srcConfig(events, 0, 4)
	root := t.TempDir()
	ps := []int{2, 3, 1, 4, 2}
	var subs []*subtask
	for s := range ps[0] {
		subs = append(subs, open(t, newTestCtx(cfg, s, ps[0]), nil))
	}
	seen := make([]int, events)
	for id := int64(1); ; id++ {
		ended := true
		for _, s := range subs {
			st, ns := s.emit(t)
			for _, n := range ns {
				seen[n]++
			}
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
			subs = append(subs, open(t, restoreTestCtx(t, cfg, s, p, id, prev), nil))
		}
	}
	for n, c := range seen {
		if c != 1 {
			t.Fatalf("event %d emitted %d times", n, c)
		}
	}
}

// The rate is the whole stream's: a subtask reading k of the splits emits
// k/splits of it.
func TestSourceRate(t *testing.T) {
	const rate = 900.0
	for _, p := range []int{1, 3} {
		clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
		var subs []*subtask
		for s := range p {
			subs = append(subs, open(t, newTestCtx(srcConfig(0, rate, 3), s, p), clock))
		}
		total := 0
		for range 2000 { // 2 s in 1 ms steps
			for _, s := range subs {
				st, ns := s.emit(t)
				if len(ns) == 0 && st.Backoff <= 0 {
					t.Fatal("nothing emitted and no backoff")
				}
				total += len(ns)
			}
			clock.advance(time.Millisecond)
		}
		if total < 2*rate-5 || total > 2*rate+5 {
			t.Errorf("p=%d: %d events in 2 s at %v/s", p, total, rate)
		}
	}
}

func TestSourceCorruptPosition(t *testing.T) {
	cfg := srcConfig(100, 0, 2)
	ctx := newTestCtx(cfg, 0, 1)
	ctx.restoredID = 1
	ctx.ListState("position").Update([][]byte{make([]byte, 23)})
	if err := (&Source{}).Open(ctx); err == nil {
		t.Fatal("short position item: no error")
	}
	ctx = newTestCtx(cfg, 0, 1)
	ctx.restoredID = 1
	it := make([]byte, positionSize)
	it[7], it[15], it[23] = 3, 2, 4 // first 3 of stride 2
	ctx.ListState("position").Update([][]byte{it})
	if err := (&Source{}).Open(ctx); err == nil {
		t.Fatal("first >= stride: no error")
	}
}
