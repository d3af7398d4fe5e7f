package nexmark

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/internal/splitsource"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// The splits, their state and the rate limit are splitsource's, tested
// there; these tests are of what nexmark-source makes of them.

const maxPerEmit = splitsource.MaxPerEmit

type subtask struct {
	ctx *sdktest.Context
	src *Source
	out sdktest.SplitOutput
}

func newCtx(cfg sdk.Config, subtask, parallelism int) *sdktest.Context {
	return sdktest.NewContext("nexmark", cfg, subtask, parallelism)
}

// restoreCtx is the context of a subtask restored from checkpoint id,
// whose subtask states (at any parallelism) are prev.
func restoreCtx(t *testing.T, cfg sdk.Config, subtask, parallelism int, id int64, prev []*weirv1.SubtaskState) *sdktest.Context {
	t.Helper()
	return sdktest.Restore(t, "nexmark", cfg, subtask, parallelism, int(id), id, prev)
}

func open(t *testing.T, ctx *sdktest.Context, clock *sdktest.Clock) *subtask {
	t.Helper()
	s := &Source{}
	if clock != nil {
		s.reader.Now = clock.Now
	}
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open subtask %d: %v", ctx.SubtaskIndex(), err)
	}
	return &subtask{ctx: ctx, src: s}
}

// emit calls Emit once and returns the event numbers of what it emitted,
// checking each record against Generate and its split.
func (s *subtask) emit(t *testing.T) (sdk.SourceStatus, []int64) {
	t.Helper()
	st, err := s.src.Emit(&s.out)
	if err != nil {
		t.Fatalf("subtask %d: Emit: %v", s.ctx.SubtaskIndex(), err)
	}
	recs, splits := s.out.Take()
	if len(recs) > maxPerEmit {
		t.Fatalf("one Emit made %d records", len(recs))
	}
	if st.Backoff < 0 || (st.Backoff > 0 && (len(recs) > 0 || st.EndOfInput)) {
		t.Fatalf("subtask %d: Emit returned %+v with %d records", s.ctx.SubtaskIndex(), st, len(recs))
	}
	var ns []int64
	for i, r := range recs {
		n := eventNumber(t, s.src.gen, r)
		var first, stride int64
		if _, err := fmt.Sscanf(splits[i], "nexmark-%d-of-%d", &first, &stride); err != nil || n%stride != first {
			t.Fatalf("event %d went to split %q", n, splits[i])
		}
		ns = append(ns, n)
	}
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
				sub := open(t, newCtx(srcConfig(tc.events, 0, tc.splits), s, tc.p), nil)
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
				if len(sub.out.Released) != len(sub.out.Opened) {
					t.Fatalf("opened splits %v, released %v", sub.out.Opened, sub.out.Released)
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
	sub := open(t, newCtx(srcConfig(0, 0, 0), 0, 1), nil)
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
		{"format": "json"}, {"kinds": []any{}}, {"kinds": "bid"}, {"kinds": []any{"bid", "sale"}},
		{"us-states": ""}, {"us-states": "or,,ca"}, {"us-states": []any{}}, {"us-states": []any{"or", 1.0}},
		{"us-states": float64(1)},
	} {
		if err := (&Source{}).Open(newCtx(cfg, 0, 1)); err == nil {
			t.Errorf("config %v: no error", cfg)
		}
	}
	// key: none and the defaults.
	sub := open(t, newCtx(sdk.Config{"events": float64(3), "key": "none"}, 0, 1), nil)
	if _, err := sub.src.Emit(&sub.out); err != nil {
		t.Fatal(err)
	}
	if recs := sub.out.Records; len(recs) != 3 || recs[0].Key != nil || recs[2].Timestamp != DefaultBaseTime.UnixMilli() {
		t.Fatalf("records %+v", recs)
	}
}

// us-states: a list or a comma-separated string, trimmed; absent, the
// default.
func TestSourceUSStates(t *testing.T) {
	want := []string{"az", "ca", "id", "or", "wa", "wy"}
	for _, v := range []any{"az,ca,id,or,wa,wy", " az, ca ,id,or,wa,wy ", []any{"az", "ca", "id", "or", "wa", "wy"}, want} {
		c := sub0Gen(t, sdk.Config{"us-states": v})
		if !slices.Equal(c.USStates, want) {
			t.Errorf("us-states %q: %q", v, c.USStates)
		}
	}
	if c := sub0Gen(t, sdk.Config{}); c.USStates != nil {
		t.Errorf("no us-states: %q", c.USStates)
	}
	cfg := srcConfig(50, 0, 1)
	cfg["us-states"] = "or"
	sub := open(t, newCtx(cfg, 0, 1), nil)
	if _, err := sub.src.Emit(&sub.out); err != nil {
		t.Fatal(err)
	}
	var people int
	for _, r := range sub.out.Records {
		e, err := Decode(r.Value)
		if err != nil || e.Person != nil && e.Person.State != "or" {
			t.Fatalf("record %+v: %+v, %v", r, e.Person, err)
		}
		if e.Person != nil {
			people++
		}
	}
	if people == 0 {
		t.Fatalf("no person among %d records", len(sub.out.Records))
	}
}

func checkpoint(t *testing.T, subs []*subtask, root string, id int64) []*weirv1.SubtaskState {
	t.Helper()
	var prev []*weirv1.SubtaskState
	for _, s := range subs {
		prev = append(prev, s.ctx.Checkpoint(t, s.src, root, id))
	}
	return prev
}

// A checkpoint after some rate-limited Emit calls, more events emitted
// after it and lost, and a restore at the same or another parallelism:
// what preceded the checkpoint plus what the restored subtasks emit is
// every event once, each split in order. (splitsource's tests cut at every
// point and restore again and again.)
func TestSourceRestoreAndRescale(t *testing.T) {
	const events, splits, rate = 300, 6, 2000.0
	for _, tc := range []struct{ from, to int }{{3, 3}, {2, 3}, {4, 1}, {2, 8}} {
		for _, cut := range []int{0, 7, 30} {
			t.Run(fmt.Sprintf("%d to %d cut %d", tc.from, tc.to, cut), func(t *testing.T) {
				cfg := srcConfig(events, rate, splits)
				root := t.TempDir()
				clock := sdktest.NewClock()
				var subs []*subtask
				for s := range tc.from {
					subs = append(subs, open(t, newCtx(cfg, s, tc.from), clock))
				}
				var before []int64
				run := func(calls int, keep bool) {
					for c := range calls {
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
				run(5, false) // after the barrier: lost with the crash

				clock2 := sdktest.NewClock()
				var after []int64
				for s := range tc.to {
					r := open(t, restoreCtx(t, cfg, s, tc.to, 1, prev), clock2)
					for range 100000 {
						clock2.Advance(time.Millisecond)
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

// The rate is the whole stream's: a subtask reading k of the splits emits
// k/splits of it.
func TestSourceRate(t *testing.T) {
	const rate = 900.0
	for _, p := range []int{1, 2, 3} {
		clock := sdktest.NewClock()
		var subs []*subtask
		for s := range p {
			subs = append(subs, open(t, newCtx(srcConfig(0, rate, 3), s, p), clock))
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
			clock.Advance(time.Millisecond)
		}
		if total < 2*rate-5 || total > 2*rate+5 {
			t.Errorf("p=%d: %d events in 2 s at %v/s", p, total, rate)
		}
	}
}

func TestSourceCorruptPosition(t *testing.T) {
	ctx := newCtx(srcConfig(100, 0, 2), 0, 1)
	ctx.RestoredID = 1
	ctx.ListState("position").Update([][]byte{make([]byte, 23)})
	err := (&Source{}).Open(ctx)
	if err == nil || !strings.Contains(err.Error(), "nexmark-source: corrupt position state") {
		t.Fatalf("Open: %v, want a corrupt position state error", err)
	}
}

// Make makes the records from the events.
func TestSourceMake(t *testing.T) {
	cfg := srcConfig(5, 0, 0)
	s := &Source{Make: func(e Event) sdk.Record { return sdk.Record{Key: []byte(e.Kind.String()), Timestamp: e.DateTime()} }}
	if err := s.Open(newCtx(cfg, 0, 1)); err != nil {
		t.Fatal(err)
	}
	var out sdktest.SplitOutput
	if st, err := s.Emit(&out); err != nil || !st.EndOfInput {
		t.Fatalf("Emit: %+v, %v", st, err)
	}
	if len(out.Records) != 5 {
		t.Fatalf("%d records, want 5", len(out.Records))
	}
	for n, r := range out.Records {
		if e := Generate(s.gen, int64(n)); string(r.Key) != e.Kind.String() || r.Value != nil || r.Timestamp != e.DateTime() {
			t.Fatalf("record %d: %+v, want Make's of %v", n, r, e)
		}
	}
}

// kinds selects the events emitted; format: csv writes them as text. The
// skipped events' numbers are still read, so positions stay the stream's.
func TestSourceKindsAndCSV(t *testing.T) {
	cfg := srcConfig(200, 0, 2)
	cfg["kinds"] = []any{"person", "bid"}
	cfg["format"] = "csv"
	var recs []sdk.Record
	for i := range 2 {
		sub := open(t, newCtx(cfg, i, 2), nil)
		for {
			st, err := sub.src.Emit(&sub.out)
			if err != nil {
				t.Fatal(err)
			}
			if st.EndOfInput {
				break
			}
		}
		recs = append(recs, sub.out.Records...)
	}
	want := map[string]bool{}
	for n := range int64(200) {
		if e := Generate(sub0Gen(t, cfg), n); e.Kind != KindAuction {
			want[e.Kind.String()+","+string(AppendCSV(nil, e))] = true
		}
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d (persons and bids of 200 events)", len(recs), len(want))
	}
	for _, r := range recs {
		if line := string(r.Key) + "," + string(r.Value); !want[line] {
			t.Fatalf("record %q is not a person's or bid's CSV line", line)
		}
	}
	bid := Event{Kind: KindBid, Bid: &Bid{Auction: 1000, Bidder: 1001, Price: 250, Channel: "Google", URL: "u", DateTime: 7, Extra: "x"}}
	if got := string(AppendCSV(nil, bid)); got != "1000,1001,250,Google,u,7,x" {
		t.Fatalf("bid as CSV: %q", got)
	}
}

func sub0Gen(t *testing.T, cfg sdk.Config) Config {
	t.Helper()
	c, err := ParseConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
