package ops

import (
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/bench/internal/stats"
	"github.com/weirproject/weir/sdk"
)

type list struct{ items [][]byte }

func (l *list) Get() [][]byte     { return l.items }
func (l *list) Update(v [][]byte) { l.items = v }
func (l *list) Add(v []byte)      { l.items = append(l.items, v) }
func (l *list) Clear()            { l.items = nil }

type fakeCtx struct {
	cfg      sdk.Config
	lists    map[string]*list
	restored int64
}

func (c *fakeCtx) JobID() string                    { return "job" }
func (c *fakeCtx) TaskName() string                 { return "source" }
func (c *fakeCtx) SubtaskIndex() int                { return 0 }
func (c *fakeCtx) Parallelism() int                 { return 1 }
func (c *fakeCtx) Metrics() sdk.MetricGroup         { return sdk.DiscardMetrics }
func (c *fakeCtx) AttemptNumber() int               { return 0 }
func (c *fakeCtx) Config() sdk.Config               { return c.cfg }
func (c *fakeCtx) Logger() *slog.Logger             { return slog.Default() }
func (c *fakeCtx) ValueState(string) sdk.ValueState { return nil }
func (c *fakeCtx) MapState(string) sdk.MapState     { return nil }
func (c *fakeCtx) ValueStateTTL(string, sdk.StateTTL) sdk.ValueState {
	return nil
}
func (c *fakeCtx) MapStateTTL(string, sdk.StateTTL) sdk.MapState { return nil }
func (c *fakeCtx) ReducingState(string, func(acc, v []byte) []byte) sdk.ReducingState {
	return nil
}
func (c *fakeCtx) UnionListState(string) sdk.ListState { return &list{} }
func (c *fakeCtx) RestoredCheckpointID() int64         { return c.restored }
func (c *fakeCtx) ReportPending(sdk.Pending)           {}
func (c *fakeCtx) TimerService() sdk.TimerService      { return nil }
func (c *fakeCtx) Output(string) sdk.Collector         { return nil }
func (c *fakeCtx) EmitLate(sdk.Record)                 {}
func (c *fakeCtx) ListState(name string) sdk.ListState {
	if c.lists[name] == nil {
		c.lists[name] = &list{}
	}
	return c.lists[name]
}

type count struct{ n int }

func (c *count) Collect(sdk.Record) { c.n++ }

// A restored clock source owes the records of the time it was down, emits
// them as fast as it can and reports when it is on time again.
func TestClockSourceCatchesUp(t *testing.T) {
	dir := t.TempDir()
	const rate = 10000
	t0 := time.Now().Add(-2 * time.Second)
	cfg := sdk.Config{"rate": float64(rate), "keys": float64(16), "t0-ms": float64(t0.UnixMilli()), "dir": dir}
	ctx := &fakeCtx{cfg: cfg, lists: map[string]*list{}}
	// Checkpointed 1 s into the timeline: position 10000.
	first := &ClockSource{}
	if err := first.Open(ctx); err != nil {
		t.Fatal(err)
	}
	first.next = rate
	if err := first.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	ctx.restored = 1
	s := &ClockSource{}
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if s.next != rate || s.lagAtOpen < rate {
		t.Fatalf("restored at %d with lag %d, want %d and ≥ %d", s.next, s.lagAtOpen, rate, rate)
	}
	out := &count{}
	deadline := time.Now().Add(5 * time.Second)
	for !s.reported && time.Now().Before(deadline) {
		if _, err := s.Emit(out); err != nil {
			t.Fatal(err)
		}
	}
	if !s.reported {
		t.Fatal("never caught up")
	}
	b, err := os.ReadFile(filepath.Join(dir, "clock-0.catchup"))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(b)); len(f) != 4 || f[0] != "1" {
		t.Fatalf("report %q", b)
	}
	if out.n < rate {
		t.Fatalf("replayed only %d records", out.n)
	}
}

type keep struct{ recs []sdk.Record }

func (k *keep) Collect(r sdk.Record) { k.recs = append(k.recs, r) }

// The latency sink keeps each window's records apart, ignores those
// created before the first window, and writes its histograms once, at
// the first record created after the last window.
func TestLatencySinkWindows(t *testing.T) {
	dir := t.TempDir()
	from := time.Now().Add(-10 * time.Second)
	s := &LatencySink{}
	cfg := sdk.Config{"dir": dir, "from-ms": float64(from.UnixMilli()), "window-ms": float64(1000), "windows": float64(2)}
	if err := s.Open(&fakeCtx{cfg: cfg, lists: map[string]*list{}}); err != nil {
		t.Fatal(err)
	}
	rec := func(created time.Time) sdk.Record {
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, uint64(created.UnixNano()))
		return sdk.Record{Value: v}
	}
	for _, at := range []time.Duration{-time.Second, 100 * time.Millisecond, 200 * time.Millisecond, 1500 * time.Millisecond} {
		if err := s.ProcessRecord(rec(from.Add(at)), nil); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "source-0.lat")
	if _, err := os.Stat(path); err == nil {
		t.Fatal("written before the windows ended")
	}
	if err := s.ProcessRecord(rec(from.Add(2500*time.Millisecond)), nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var hs []stats.Histogram
	if err := json.Unmarshal(b, &hs); err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].N != 2 || hs[1].N != 1 {
		t.Fatalf("windows %+v", hs)
	}
	// A record 8.5 s old at the sink.
	if q := hs[1].Quantile(0.5); q < 8e9 || q > 9.5e9 {
		t.Fatalf("latency %v ns", q)
	}
}

// A paced latency source emits what is due and backs off until the next
// record; unpaced, it emits a full burst per call.
func TestLatencySourcePacing(t *testing.T) {
	now := time.Unix(1000, 0)
	s := &LatencySource{now: func() time.Time { return now }}
	if err := s.Open(&fakeCtx{cfg: sdk.Config{"rate": float64(1000)}, lists: map[string]*list{}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(100 * time.Millisecond)
	var k keep
	st, err := s.Emit(&k)
	if err != nil || len(k.recs) != 100 || st.Backoff != 0 {
		t.Fatalf("emitted %d, %+v, %v", len(k.recs), st, err)
	}
	// The 101st record is due 1ms after the 100th.
	if st, _ := s.Emit(&k); st.Backoff != time.Millisecond {
		t.Fatalf("backoff %v when nothing is due, want 1ms", st.Backoff)
	}
	created := int64(binary.BigEndian.Uint64(k.recs[0].Value))
	if d := time.Since(time.Unix(0, created)); d < 0 || d > time.Second {
		t.Fatalf("stamp %v ago", d)
	}
	u := &LatencySource{}
	if err := u.Open(&fakeCtx{cfg: sdk.Config{}, lists: map[string]*list{}}); err != nil {
		t.Fatal(err)
	}
	var all count
	if _, err := u.Emit(&all); err != nil || all.n != 256 {
		t.Fatalf("unpaced burst %d, %v", all.n, err)
	}
}
