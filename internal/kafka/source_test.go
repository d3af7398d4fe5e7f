package kafka

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/internal/kafka/kafkacfg"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// srcCtx is the sdk.Context of one kafka-source subtask, its operator
// state in a real state.Heap: checkpoints go through the snapshot files
// and the restore redistribution (union state given whole) a failover
// uses.
type srcCtx struct {
	sdk.Context // nil: only what the source calls is implemented
	cfg         sdk.Config
	subtask     int
	parallelism int
	restoredID  int64
	heap        *state.Heap
	metrics     *srcMetrics
	pending     atomic.Pointer[sdk.Pending]
}

func (c *srcCtx) ReportPending(p sdk.Pending) { c.pending.Store(&p) }

const srcMaxParallelism = 128

func (c *srcCtx) Config() sdk.Config          { return c.cfg }
func (c *srcCtx) TaskName() string            { return "kafka-source" }
func (c *srcCtx) SubtaskIndex() int           { return c.subtask }
func (c *srcCtx) Parallelism() int            { return c.parallelism }
func (c *srcCtx) AttemptNumber() int          { return 0 }
func (c *srcCtx) RestoredCheckpointID() int64 { return c.restoredID }
func (c *srcCtx) Logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
func (c *srcCtx) ListState(name string) sdk.ListState { return c.heap.ListState(name, false) }
func (c *srcCtx) Metrics() sdk.MetricGroup {
	if c.metrics == nil {
		c.metrics = &srcMetrics{values: map[string]float64{}}
	}
	return c.metrics
}

// srcMetrics keeps the last value of every gauge series, by name and
// label values joined with commas.
type srcMetrics struct {
	name   string
	values map[string]float64
}

func (m *srcMetrics) Gauge(name, _ string, _ ...string) sdk.Gauge { m.name = name; return m }
func (m *srcMetrics) Set(v float64, lv ...string)                 { m.values[m.name+"{"+strings.Join(lv, ",")+"}"] = v }
func (m *srcMetrics) Delete(lv ...string)                         { delete(m.values, m.name+"{"+strings.Join(lv, ",")+"}") }
func (c *srcCtx) UnionListState(name string) sdk.ListState        { return c.heap.ListState(name, true) }

// srcOutput is the SourceOutput Emit gets: it records the splits declared
// and released and which split each record came through.
type srcOutput struct {
	t        *testing.T
	records  []srcRecord
	declared []string
	released []string
}

type srcRecord struct {
	split string
	sdk.Record
}

func (o *srcOutput) Collect(r sdk.Record) {
	o.t.Errorf("record %q collected outside any split", r.Value)
	o.records = append(o.records, srcRecord{"", r})
}

func (o *srcOutput) Split(id string) sdk.Collector {
	if slices.Contains(o.declared, id) {
		o.t.Errorf("split %s declared twice", id)
	}
	o.declared = append(o.declared, id)
	return srcSplitOut{o, id}
}

func (o *srcOutput) ReleaseSplit(id string) {
	if !slices.Contains(o.declared, id) || slices.Contains(o.released, id) {
		o.t.Errorf("split %s released but not declared, or twice (declared %v, released %v)", id, o.declared, o.released)
	}
	o.released = append(o.released, id)
}

type srcSplitOut struct {
	o  *srcOutput
	id string
}

func (c srcSplitOut) Collect(r sdk.Record) {
	if slices.Contains(c.o.released, c.id) {
		c.o.t.Errorf("record %q on split %s after it was released", r.Value, c.id)
	}
	c.o.records = append(c.o.records, srcRecord{c.id, r})
}

// take returns the values collected since the last call.
func (o *srcOutput) take() []string {
	var vs []string
	for _, r := range o.records {
		vs = append(vs, string(r.Value))
	}
	o.records = nil
	return vs
}

// srcSubtask is one subtask of a kafka-source under test.
type srcSubtask struct {
	ctx *srcCtx
	src *Source
	out *srcOutput
	// got are every value emitted, in order.
	got []string
}

func srcOpenErr(t *testing.T, cfg sdk.Config, subtask, parallelism int, restoredID int64, prev []*weirv1.SubtaskState) (*srcSubtask, error) {
	t.Helper()
	c := &srcCtx{
		cfg: cfg, subtask: subtask, parallelism: parallelism, restoredID: restoredID,
		heap: state.NewHeap(srcMaxParallelism, keygroup.RangeFor(srcMaxParallelism, parallelism, subtask)),
	}
	if prev != nil {
		if err := c.heap.Restore(prev, subtask, parallelism); err != nil {
			t.Fatalf("restore subtask %d/%d: %v", subtask, parallelism, err)
		}
	}
	s := &Source{}
	err := s.Open(c)
	t.Cleanup(func() { _ = s.Close() })
	return &srcSubtask{ctx: c, src: s, out: &srcOutput{t: t}}, err
}

// srcOpen opens subtask of parallelism, restored from checkpoint id whose
// subtask states are prev (nil: a first start).
func srcOpen(t *testing.T, cfg sdk.Config, subtask, parallelism int, id int64, prev []*weirv1.SubtaskState) *srcSubtask {
	t.Helper()
	s, err := srcOpenErr(t, cfg, subtask, parallelism, id, prev)
	if err != nil {
		t.Fatalf("open kafka-source %d/%d: %v", subtask, parallelism, err)
	}
	return s
}

// emit calls Emit once and checks what every call must satisfy.
func (s *srcSubtask) emit(t *testing.T) (sdk.SourceStatus, []string) {
	t.Helper()
	start := time.Now()
	st, err := s.src.Emit(s.out)
	if err != nil {
		t.Fatalf("subtask %d: Emit: %v", s.ctx.subtask, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("subtask %d: Emit blocked for %s", s.ctx.subtask, d)
	}
	vs := s.out.take()
	if len(vs) > sourceMaxPerEmit {
		t.Fatalf("subtask %d: one Emit produced %d records, more than %d", s.ctx.subtask, len(vs), sourceMaxPerEmit)
	}
	if st.Backoff < 0 || st.Backoff > time.Second {
		t.Fatalf("subtask %d: Emit returned backoff %s", s.ctx.subtask, st.Backoff)
	}
	s.got = append(s.got, vs...)
	return st, vs
}

// srcWait is how long a test waits for records to arrive.
const srcWait = 15 * time.Second

// emitUntil emits until at least n records came in all, or the end of
// input; it returns whether the input ended.
func (s *srcSubtask) emitUntil(t *testing.T, n int) bool {
	t.Helper()
	deadline := time.Now().Add(srcWait)
	for len(s.got) < n {
		st, _ := s.emit(t)
		if st.EndOfInput {
			return true
		}
		if time.Now().After(deadline) {
			t.Fatalf("subtask %d: %d records after %s, want %d", s.ctx.subtask, len(s.got), srcWait, n)
		}
		time.Sleep(st.Backoff) // the runtime's backoff, not a wait for a condition
	}
	return false
}

// drain emits until the end of input.
func (s *srcSubtask) drain(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(srcWait)
	for {
		st, _ := s.emit(t)
		if st.EndOfInput {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("subtask %d: no end of input after %s (%d records)", s.ctx.subtask, srcWait, len(s.got))
		}
		time.Sleep(st.Backoff)
	}
}

// checkpoint snapshots the subtask as the task does (SnapshotState, then
// the heap's snapshot written into chk-<id> under root).
func (s *srcSubtask) checkpoint(t *testing.T, root string, id int64) *weirv1.SubtaskState {
	t.Helper()
	if err := s.src.SnapshotState(id); err != nil {
		t.Fatalf("subtask %d: SnapshotState(%d): %v", s.ctx.subtask, id, err)
	}
	dir := filepath.Join(root, "chk-"+strconv.FormatInt(id, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	snap, err := s.ctx.heap.Snapshot().Write(dir, s.ctx.TaskName(), s.ctx.subtask, s.ctx.parallelism)
	if err != nil {
		t.Fatalf("subtask %d: write snapshot %d: %v", s.ctx.subtask, id, err)
	}
	return snap
}

// srcValue is the value of record i of a partition.
func srcValue(topic string, partition int32, i int) string {
	return fmt.Sprintf("%s/%d/%d", topic, partition, i)
}

// srcTimestamp is the timestamp of record i.
func srcTimestamp(i int) time.Time { return time.UnixMilli(1_000_000 + int64(i)*100) }

// srcProduce writes records from..to-1 to every partition of topic and
// returns their values.
func srcProduce(t *testing.T, addr, topic string, partitions int32, from, to int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	var values []string
	for p := range partitions {
		for i := from; i < to; i++ {
			v := srcValue(topic, p, i)
			values = append(values, v)
			recs = append(recs, &kgo.Record{
				Topic: topic, Partition: p, Key: []byte("k" + strconv.Itoa(i)), Value: []byte(v), Timestamp: srcTimestamp(i),
				Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}, {Key: "empty"}},
			})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), srcWait)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return values
}

// srcSameOnce fails unless got holds every value of want exactly once.
func srcSameOnce(t *testing.T, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, v := range got {
		count[v]++
	}
	var dup, missing, extra []string
	for _, v := range want {
		switch count[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dup = append(dup, v)
		}
		delete(count, v)
	}
	for v := range count {
		extra = append(extra, v)
	}
	if len(dup)+len(missing)+len(extra) > 0 {
		slices.Sort(extra)
		t.Fatalf("%d records, want %d: duplicated %v, missing %v, unexpected %v", len(got), len(want), srcFirst(dup), srcFirst(missing), srcFirst(extra))
	}
}

func srcFirst(vs []string) []string {
	if len(vs) > 10 {
		return append(vs[:10:10], fmt.Sprintf("… (%d in all)", len(vs)))
	}
	return vs
}

// srcInOrder fails unless each partition's values come in offset order,
// one after the other.
func srcInOrder(t *testing.T, got []string) {
	t.Helper()
	last := map[string]int{}
	for _, v := range got {
		i := strings.LastIndexByte(v, '/')
		n, _ := strconv.Atoi(v[i+1:])
		if prev, ok := last[v[:i]]; ok && n != prev+1 {
			t.Fatalf("partition %s: record %d after %d", v[:i], n, prev)
		}
		last[v[:i]] = n
	}
}

func srcConfig(addr string, kv ...any) sdk.Config {
	cfg := sdk.Config{"bootstrap-servers": addr}
	for i := 0; i < len(kv); i += 2 {
		cfg[kv[i].(string)] = kv[i+1]
	}
	return cfg
}

func TestSourceReadsEveryPartitionOnce(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(4, "in"), kfake.SeedTopics(1, "in2"))
	want := srcProduce(t, addr, "in", 4, 0, 50)
	want = append(want, srcProduce(t, addr, "in2", 1, 0, 30)...)
	cfg := srcConfig(addr, "topics", []any{"in", "in2"})

	const parallelism = 2
	var all []string
	var declared []string
	for i := range parallelism {
		s := srcOpen(t, cfg, i, parallelism, 0, nil)
		// Splits are declared before anything is emitted, including
		// those of partitions with nothing to read yet.
		s.emit(t)
		var mine []string
		for _, tp := range []sourceTP{{"in", 0}, {"in", 1}, {"in", 2}, {"in", 3}, {"in2", 0}} {
			if sourceOwner(tp, parallelism) == i {
				mine = append(mine, tp.String())
			}
		}
		if !slices.Equal(s.out.declared, mine) {
			t.Fatalf("subtask %d declared splits %v, want %v", i, s.out.declared, mine)
		}
		declared = append(declared, s.out.declared...)
		n := 0
		for _, v := range want {
			if slices.Contains(mine, strings.Replace(v[:strings.LastIndexByte(v, '/')], "/", "-", 1)) {
				n++
			}
		}
		s.emitUntil(t, n)
		// Nothing else arrives.
		for range 5 {
			s.emit(t)
		}
		srcInOrder(t, s.got)
		all = append(all, s.got...)
		if len(s.out.released) != 0 {
			t.Fatalf("unbounded source released splits %v", s.out.released)
		}
	}
	slices.Sort(declared)
	if want := []string{"in-0", "in-1", "in-2", "in-3", "in2-0"}; !slices.Equal(declared, want) {
		t.Fatalf("splits declared %v, want each of %v once", declared, want)
	}
	srcSameOnce(t, all, want)
}

func TestSourceRecordFields(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(1, "in"))
	srcProduce(t, addr, "in", 1, 0, 3)
	s := srcOpen(t, srcConfig(addr, "topic", "in", "bounded", "latest"), 0, 1, 0, nil)
	var recs []srcRecord
	deadline := time.Now().Add(srcWait)
	for {
		st, err := s.src.Emit(s.out)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, s.out.records...)
		s.out.records = nil
		if st.EndOfInput {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no end of input")
		}
		time.Sleep(st.Backoff)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i, r := range recs {
		if r.split != "in-0" || string(r.Key) != "k"+strconv.Itoa(i) || string(r.Value) != srcValue("in", 0, i) || r.Timestamp != srcTimestamp(i).UnixMilli() {
			t.Fatalf("record %d: split %s key %q value %q timestamp %d", i, r.split, r.Key, r.Value, r.Timestamp)
		}
		if len(r.Headers) != 2 || r.Headers[0].Key != "i" || string(r.Headers[0].Value) != strconv.Itoa(i) || r.Headers[1].Key != "empty" || len(r.Headers[1].Value) != 0 {
			t.Fatalf("record %d: headers %+v, want i=%d and empty", i, r.Headers, i)
		}
	}
	if lag := s.ctx.metrics.values; len(lag) != 1 || lag["weir_kafka_source_lag_records{in,0}"] != 0 {
		t.Fatalf("lag after reading everything: %v, want in-0 at 0", lag)
	}
	if !slices.Equal(s.out.released, []string{"in-0"}) {
		t.Fatalf("released %v, want [in-0]", s.out.released)
	}
}

// TestSourceLag: the lag gauge is the partition's end minus the position
// after each fetch, per partition, and reaches 0 once everything is read.
func TestSourceLag(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(2, "in"))
	srcProduce(t, addr, "in", 2, 0, 1500)
	s := srcOpen(t, srcConfig(addr, "topic", "in"), 0, 1, 0, nil)
	s.emitUntil(t, 1)
	lag := s.ctx.metrics.values
	var behind float64
	for _, v := range lag {
		behind += v
	}
	// Every record was produced before the first fetch, so every fetched
	// partition's end is 1500, and what was read of them is 1500 - lag.
	if read := 1500*float64(len(lag)) - behind; len(lag) == 0 || read != float64(len(s.got)) {
		t.Fatalf("after %d of 3000 records: lag %v", len(s.got), lag)
	}
	s.emitUntil(t, 3000)
	if len(lag) != 2 || lag["weir_kafka_source_lag_records{in,0}"] != 0 || lag["weir_kafka_source_lag_records{in,1}"] != 0 {
		t.Fatalf("after reading everything: lag %v, want both partitions at 0", lag)
	}
}

// The backlog the autoscaler reads is reported from the source's own
// goroutine, asking the broker for the partitions' ends: it stays true
// while Emit is not called (a source blocked by back-pressure) and falls
// as the source reads.
func TestSourceReportsPending(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(2, "in"))
	srcProduce(t, addr, "in", 2, 0, 1500)
	s := srcOpen(t, srcConfig(addr, "topic", "in"), 0, 1, 0, nil)
	waitPending := func(want int64) {
		t.Helper()
		poll.UntilNoError(t, 10*time.Second, 50*time.Millisecond, fmt.Sprintf("a backlog of %d records reported", want), func() (bool, error) {
			p := s.ctx.pending.Load()
			return p != nil && p.Known && p.Records == want && p.Splits == 2, nil
		})
	}
	waitPending(3000) // nothing emitted yet
	srcProduce(t, addr, "in", 2, 1500, 1600)
	waitPending(3200) // more arrived, still nothing emitted
	s.emitUntil(t, 3200)
	waitPending(0)

	// A subtask that owns no partition reports an empty backlog.
	var idle *srcSubtask
	for i := 0; idle == nil && i < 8; i++ {
		if x := srcOpen(t, srcConfig(addr, "topic", "in"), i, 8, 0, nil); len(x.src.order) == 0 {
			idle = x
		}
	}
	if idle == nil {
		t.Fatal("every subtask of 8 owns one of 2 partitions")
	}
	poll.UntilNoError(t, 10*time.Second, 50*time.Millisecond, "an empty backlog reported", func() (bool, error) {
		p := idle.ctx.pending.Load()
		return p != nil && p.Known && p.Records == 0 && p.Splits == 0, nil
	})

	// A bounded source counts only what lies before its stops.
	b := srcOpen(t, srcConfig(addr, "topic", "in", "bounded", "latest"), 0, 1, 0, nil)
	srcProduce(t, addr, "in", 2, 1600, 2600)
	poll.UntilNoError(t, 10*time.Second, 50*time.Millisecond, "the bounded backlog reported", func() (bool, error) {
		p := b.ctx.pending.Load()
		return p != nil && p.Known && p.Records == 3200, nil
	})
}

func TestSourceTopicPattern(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(2, "pat-a"), kfake.SeedTopics(1, "pat-b"), kfake.SeedTopics(1, "other"))
	want := srcProduce(t, addr, "pat-a", 2, 0, 10)
	want = append(want, srcProduce(t, addr, "pat-b", 1, 0, 10)...)
	srcProduce(t, addr, "other", 1, 0, 10)
	s := srcOpen(t, srcConfig(addr, "topic-pattern", "^pat-", "bounded", "latest"), 0, 1, 0, nil)
	s.drain(t)
	srcSameOnce(t, s.got, want)
}

// TestSourceRestoreExactly checkpoints mid-stream, keeps emitting (what
// a failure then loses), and restores: the restored source continues
// right after the last record before the checkpoint.
func TestSourceRestoreExactly(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(3, "in"))
	want := srcProduce(t, addr, "in", 3, 0, 400)
	cfg := srcConfig(addr, "topic", "in")
	root := t.TempDir()

	a := srcOpen(t, cfg, 0, 1, 0, nil)
	a.emitUntil(t, 1)
	a.emit(t)
	before := slices.Clone(a.got)
	if len(before) >= len(want) {
		t.Fatalf("read everything (%d) before the checkpoint", len(before))
	}
	chk := a.checkpoint(t, root, 1)
	a.emitUntil(t, len(before)+1) // after the barrier: lost with the failure
	_ = a.src.Close()

	b := srcOpen(t, cfg, 0, 1, 1, []*weirv1.SubtaskState{chk})
	b.emitUntil(t, len(want)-len(before))
	for range 3 {
		b.emit(t)
	}
	srcInOrder(t, append(slices.Clone(before), b.got...))
	srcSameOnce(t, append(before, b.got...), want)
}

// TestSourceRescale restores 2 subtasks' checkpoint at 3, then that at 1:
// every record is emitted once overall, and the bounded stop offsets found
// at the first start hold across restores.
func TestSourceRescale(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(6, "in"))
	want := srcProduce(t, addr, "in", 6, 0, 300)
	cfg := srcConfig(addr, "topic", "in", "bounded", "latest")
	root := t.TempDir()

	var emitted []string
	// stage runs the subtasks of one attempt: each emits some records,
	// all checkpoint id, and each emits a little more, which the
	// following restore forgets.
	stage := func(parallelism int, restoredID, id int64, prev []*weirv1.SubtaskState) []*weirv1.SubtaskState {
		var subs []*srcSubtask
		for i := range parallelism {
			subs = append(subs, srcOpen(t, cfg, i, parallelism, restoredID, prev))
		}
		if restoredID == 0 {
			// Written after the first start: past the bounded end.
			srcProduce(t, addr, "in", 6, 300, 350)
		}
		var states []*weirv1.SubtaskState
		for _, s := range subs {
			s.emitUntil(t, 1)
			emitted = append(emitted, s.got...)
			states = append(states, s.checkpoint(t, root, id))
		}
		for _, s := range subs {
			s.emit(t)
			_ = s.src.Close()
		}
		return states
	}
	chk1 := stage(2, 0, 1, nil)
	chk2 := stage(3, 1, 2, chk1)
	last := srcOpen(t, cfg, 0, 1, 2, chk2)
	last.drain(t)
	emitted = append(emitted, last.got...)
	srcSameOnce(t, emitted, want)
	if len(last.out.released) != len(last.out.declared) {
		t.Fatalf("declared %v, released %v", last.out.declared, last.out.released)
	}
}

// TestSourceRescaleUnbounded goes 3 → 1 → 2 with an unbounded source and
// records written between the attempts.
func TestSourceRescaleUnbounded(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(4, "in"))
	want := srcProduce(t, addr, "in", 4, 0, 200)
	cfg := srcConfig(addr, "topic", "in")
	root := t.TempDir()
	var emitted []string
	var prev []*weirv1.SubtaskState
	for id, parallelism := range []int{3, 1, 2} {
		var subs []*srcSubtask
		for i := range parallelism {
			subs = append(subs, srcOpen(t, cfg, i, parallelism, int64(id), prev))
		}
		prev = nil
		for _, s := range subs {
			s.emitUntil(t, 1)
			emitted = append(emitted, s.got...)
			prev = append(prev, s.checkpoint(t, root, int64(id+1)))
			_ = s.src.Close()
		}
		want = append(want, srcProduce(t, addr, "in", 4, 200+10*id, 210+10*id)...)
	}
	var subs []*srcSubtask
	for i := range 2 {
		subs = append(subs, srcOpen(t, cfg, i, 2, 3, prev))
	}
	deadline := time.Now().Add(srcWait)
	for n := 0; len(emitted)+n < len(want); {
		if time.Now().After(deadline) {
			t.Fatalf("%d records after %s, want %d", len(emitted)+n, srcWait, len(want))
		}
		n = 0
		for _, s := range subs {
			s.emit(t)
			n += len(s.got)
		}
		time.Sleep(sourceMinBackoff) // as the runtime backs off
	}
	for _, s := range subs {
		emitted = append(emitted, s.got...)
	}
	srcSameOnce(t, emitted, want)
}

func TestSourceBoundedLatest(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(3, "in"))
	var want []string
	// Partition 2 stays empty: it is done at once.
	for p := range int32(2) {
		for i := range 20 {
			want = append(want, srcValue("in", p, i))
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(p int32, from, to int) {
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Partition: p, Value: []byte(srcValue("in", p, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 0, 20)
	produce(1, 0, 20)

	// More subtasks than partitions: some read nothing and end at once.
	const parallelism = 5
	var got []string
	var subs []*srcSubtask
	for i := range parallelism {
		subs = append(subs, srcOpen(t, srcConfig(addr, "topic", "in", "bounded", "latest"), i, parallelism, 0, nil))
	}
	produce(0, 20, 30) // after the start: not read
	for _, s := range subs {
		s.drain(t)
		got = append(got, s.got...)
		var nonEmpty []string
		for _, id := range s.out.declared {
			if id != "in-2" {
				nonEmpty = append(nonEmpty, id)
			}
		}
		// The empty partition is done before it is read: it holds no
		// watermark back.
		slices.Sort(nonEmpty)
		slices.Sort(s.out.released)
		if slices.Contains(s.out.declared, "in-2") || !slices.Equal(s.out.released, nonEmpty) {
			t.Fatalf("subtask %d: declared %v, released %v", s.ctx.subtask, s.out.declared, s.out.released)
		}
	}
	srcSameOnce(t, got, want)
}

// TestSourceReadCommitted writes committed, aborted, plain and
// still-open transactional records: read-committed emits the committed and
// plain ones, and a bounded source ends although the log ends with
// transaction markers and an open transaction.
func TestSourceReadCommitted(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(2, "tx"))
	ctx, cancel := context.WithTimeout(context.Background(), srcWait)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	txClient := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	tx, open := txClient("tx-1"), txClient("tx-2")
	records := func(tag string, n int) []*kgo.Record {
		var rs []*kgo.Record
		for p := range int32(2) {
			for i := range n {
				rs = append(rs, &kgo.Record{Topic: "tx", Partition: p, Value: fmt.Appendf(nil, "%s/%d/%d", tag, p, i)})
			}
		}
		return rs
	}
	values := func(rs []*kgo.Record) []string {
		var vs []string
		for _, r := range rs {
			vs = append(vs, string(r.Value))
		}
		return vs
	}
	transaction := func(cl *kgo.Client, rs []*kgo.Record, end kgo.TransactionEndTry) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	committed1, aborted1, plainRecs, committed2, aborted2 := records("c1", 5), records("a1", 3), records("p", 2), records("c2", 4), records("a2", 2)
	transaction(tx, committed1, kgo.TryCommit)
	transaction(tx, aborted1, kgo.TryAbort)
	if err := plain.ProduceSync(ctx, plainRecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	transaction(tx, committed2, kgo.TryCommit)
	transaction(tx, aborted2, kgo.TryAbort) // the log ends with abort markers
	// A transaction still open: read-committed stops before it.
	openRecs := records("o", 2)
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, openRecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	rc := srcOpen(t, srcConfig(addr, "topic", "tx", "bounded", "latest"), 0, 1, 0, nil)
	rc.drain(t)
	want := slices.Concat(values(committed1), values(plainRecs), values(committed2))
	srcSameOnce(t, rc.got, want)

	// Read-uncommitted sees everything, aborted and open included.
	ru := srcOpen(t, srcConfig(addr, "topic", "tx", "bounded", "latest", "isolation", "read-uncommitted"), 0, 1, 0, nil)
	ru.drain(t)
	srcSameOnce(t, ru.got, slices.Concat(want, values(aborted1), values(aborted2), values(openRecs)))

	// An unbounded read-committed source picks the open transaction up
	// once it commits.
	un := srcOpen(t, srcConfig(addr, "topic", "tx"), 0, 1, 0, nil)
	un.emitUntil(t, len(want))
	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	un.emitUntil(t, len(want)+len(openRecs))
	srcSameOnce(t, un.got, slices.Concat(want, values(openRecs)))
}

func TestSourceStartingOffsets(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(2, "in"))
	all := srcProduce(t, addr, "in", 2, 0, 10)
	from := func(i int) []string {
		var vs []string
		for _, v := range all {
			n, _ := strconv.Atoi(v[strings.LastIndexByte(v, '/')+1:])
			if n >= i {
				vs = append(vs, v)
			}
		}
		return vs
	}

	t.Run("earliest", func(t *testing.T) {
		s := srcOpen(t, srcConfig(addr, "topic", "in", "bounded", "latest", "starting-offsets", "earliest"), 0, 1, 0, nil)
		s.drain(t)
		srcSameOnce(t, s.got, all)
	})
	t.Run("timestamp", func(t *testing.T) {
		ms := srcTimestamp(6).UnixMilli() - 50 // between records 5 and 6
		s := srcOpen(t, srcConfig(addr, "topic", "in", "bounded", "latest", "starting-offsets", "timestamp:"+strconv.FormatInt(ms, 10)), 0, 1, 0, nil)
		s.drain(t)
		srcSameOnce(t, s.got, from(6))
	})
	t.Run("timestamp after the end", func(t *testing.T) {
		s := srcOpen(t, srcConfig(addr, "topic", "in", "bounded", "latest", "starting-offsets", "timestamp:"+strconv.FormatInt(srcTimestamp(99).UnixMilli(), 10)), 0, 1, 0, nil)
		s.drain(t)
		srcSameOnce(t, s.got, nil)
	})
	t.Run("latest", func(t *testing.T) {
		addr, _ := newBroker(t, kfake.SeedTopics(2, "in"))
		srcProduce(t, addr, "in", 2, 0, 10)
		s := srcOpen(t, srcConfig(addr, "topic", "in", "starting-offsets", "latest"), 0, 1, 0, nil)
		s.emit(t)
		want := srcProduce(t, addr, "in", 2, 10, 13)
		s.emitUntil(t, len(want))
		for range 3 {
			s.emit(t)
		}
		srcSameOnce(t, s.got, want)
	})
	t.Run("committed", func(t *testing.T) {
		// A source with group-id commits its checkpoint's positions once
		// the checkpoint completes…
		g := srcOpen(t, srcConfig(addr, "topic", "in", "group-id", "mon", "bounded", "latest"), 0, 1, 0, nil)
		g.emitUntil(t, 1)
		if err := g.src.SnapshotState(7); err != nil {
			t.Fatal(err)
		}
		positions := map[int32]int64{}
		for _, p := range g.src.order {
			positions[p.partition] = p.next
		}
		if err := g.src.NotifyCheckpointComplete(7); err != nil {
			t.Fatal(err)
		}
		adm, err := kadm.NewOptClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer adm.Close()
		deadline := time.Now().Add(srcWait)
		for {
			resp, err := adm.FetchOffsets(context.Background(), "mon")
			ok := err == nil
			for p, at := range positions {
				o, found := resp.Lookup("in", p)
				ok = ok && found && o.Err == nil && o.At == at
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group mon: committed %v (err %v), want %v", resp, err, positions)
			}
			time.Sleep(20 * time.Millisecond) // polling, with the deadline above
		}
		// …which starting-offsets: committed starts from.
		s := srcOpen(t, srcConfig(addr, "topic", "in", "group-id", "mon", "starting-offsets", "committed", "bounded", "latest"), 0, 1, 0, nil)
		s.drain(t)
		srcSameOnce(t, append(slices.Clone(g.got), s.got...), all)

		// A group without commits starts at the earliest offsets.
		e := srcOpen(t, srcConfig(addr, "topic", "in", "group-id", "none", "starting-offsets", "committed", "bounded", "latest"), 0, 1, 0, nil)
		e.drain(t)
		srcSameOnce(t, e.got, all)
	})
	t.Run("only without a restored position", func(t *testing.T) {
		cfg := srcConfig(addr, "topic", "in", "starting-offsets", "latest")
		a := srcOpen(t, cfg, 0, 1, 0, nil)
		a.emit(t)
		chk := a.checkpoint(t, t.TempDir(), 1)
		_ = a.src.Close()
		want := srcProduce(t, addr, "in", 2, 10, 12)
		// Restored: the positions, not latest, say where to start.
		b := srcOpen(t, cfg, 0, 1, 1, []*weirv1.SubtaskState{chk})
		b.emitUntil(t, len(want))
		srcSameOnce(t, b.got, want)
	})
}

func TestSourcePartitionDiscovery(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(2, "grow"))
	want := srcProduce(t, addr, "grow", 2, 0, 5)
	s := srcOpen(t, srcConfig(addr, "topic", "grow", "partition-discovery-interval", "50ms"), 0, 1, 0, nil)
	s.emitUntil(t, len(want))

	adm, err := kadm.NewOptClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), srcWait)
	defer cancel()
	if _, err := adm.CreatePartitions(ctx, 2, "grow"); err != nil {
		t.Fatal(err)
	}
	// Records written to the new partitions before the source finds them
	// are read too: new partitions start at the earliest offset.
	want = append(want, srcProduce(t, addr, "grow", 4, 5, 10)...)
	s.emitUntil(t, len(want))
	srcSameOnce(t, s.got, want)
	slices.Sort(s.out.declared)
	if !slices.Equal(s.out.declared, []string{"grow-0", "grow-1", "grow-2", "grow-3"}) {
		t.Fatalf("declared %v", s.out.declared)
	}
}

func TestSourceFailsClearly(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(1, "in"))

	t.Run("missing topic", func(t *testing.T) {
		start := time.Now()
		_, err := srcOpenErr(t, srcConfig(addr, "topics", []any{"in", "nope"}), 0, 1, 0, nil)
		if err == nil || !strings.Contains(err.Error(), `"nope" does not exist`) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("open with a missing topic: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %s to fail", d)
		}
	})
	t.Run("pattern matches nothing", func(t *testing.T) {
		_, err := srcOpenErr(t, srcConfig(addr, "topic-pattern", "^nope"), 0, 1, 0, nil)
		if err == nil || !strings.Contains(err.Error(), "matches") {
			t.Fatalf("open with a pattern matching nothing: %v", err)
		}
	})
	t.Run("unreachable brokers", func(t *testing.T) {
		// A port nobody listens on refuses at once.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		refused := ln.Addr().String()
		ln.Close()
		// A listener that never answers: the request waits until
		// open-timeout.
		silent, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		for _, dead := range []string{refused, silent.Addr().String()} {
			start := time.Now()
			_, err = srcOpenErr(t, srcConfig(dead, "topic", "in", "open-timeout", "1s"), 0, 1, 0, nil)
			if err == nil || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("open with unreachable brokers: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s to fail", d)
			}
			t.Log(err)
		}
	})
	for _, tc := range []struct {
		name string
		cfg  sdk.Config
		want string
	}{
		{"no servers", sdk.Config{"topic": "in"}, "bootstrap-servers"},
		{"no topic", srcConfig(addr), `one of "topic"`},
		{"two topic settings", srcConfig(addr, "topic", "in", "topic-pattern", "x"), "only one"},
		{"bad pattern", srcConfig(addr, "topic-pattern", "("), "topic-pattern"},
		{"bad topics", srcConfig(addr, "topics", "in"), "topics"},
		{"bad starting-offsets", srcConfig(addr, "topic", "in", "starting-offsets", "oldest"), "starting-offsets"},
		{"bad timestamp", srcConfig(addr, "topic", "in", "starting-offsets", "timestamp:x"), "timestamp"},
		{"committed without group", srcConfig(addr, "topic", "in", "starting-offsets", "committed"), "group-id"},
		{"bad isolation", srcConfig(addr, "topic", "in", "isolation", "serializable"), "isolation"},
		{"bad bounded", srcConfig(addr, "topic", "in", "bounded", "earliest"), "bounded"},
		{"bounded discovery", srcConfig(addr, "topic", "in", "bounded", "latest", "partition-discovery-interval", "1s"), "partition-discovery-interval"},
		{"bad interval", srcConfig(addr, "topic", "in", "partition-discovery-interval", "soon"), "partition-discovery-interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := srcOpenErr(t, tc.cfg, 0, 1, 0, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "kafka-source: ") {
				t.Fatalf("error %v, want one about %s", err, tc.want)
			}
		})
	}
}

func TestSourcePositionEncoding(t *testing.T) {
	p := &sourcePart{sourceTP: sourceTP{"a-b", 7}, next: 1 << 40, stop: -1}
	got, err := decodeSourcePositions([][]byte{encodeSourcePosition(p)})
	if err != nil || got[p.sourceTP] != (sourcePosition{1 << 40, -1}) {
		t.Fatalf("decoded %v, %v", got, err)
	}
	if _, err := decodeSourcePositions([][]byte{{1, 2, 3}}); err == nil {
		t.Fatal("short item decoded")
	}
	if _, err := decodeSourcePositions([][]byte{encodeSourcePosition(p), encodeSourcePosition(p)}); err == nil {
		t.Fatal("two positions of one partition decoded")
	}
}

// TestSourceBacklog: with backlog-lag the source reports a backlog while
// any partition it reads is that far behind, and that it caught up once
// none is; without it, it never tells.
func TestSourceBacklog(t *testing.T) {
	a, b := sourceTP{"in", 0}, sourceTP{"in", 1}
	for _, c := range []struct {
		threshold int64
		lags      map[sourceTP]int64
		want      sdk.Backlog
	}{
		{0, map[sourceTP]int64{a: 1 << 40}, sdk.BacklogUnknown},
		{100, nil, sdk.BacklogUnknown},
		{100, map[sourceTP]int64{a: 99, b: 0}, sdk.NoBacklog},
		{100, map[sourceTP]int64{a: 99, b: 100}, sdk.ProcessingBacklog},
	} {
		s := &Source{cfg: kafkacfg.SourceConfig{BacklogLag: c.threshold}, lags: c.lags}
		if got := s.backlog(); got != c.want {
			t.Errorf("backlog-lag %d, lags %v: %v, want %v", c.threshold, c.lags, got, c.want)
		}
	}
	if _, err := kafkacfg.ParseSourceConfig(sdk.Config{"bootstrap-servers": "x:9092", "topic": "in", "backlog-lag": -1}); err == nil {
		t.Error("a negative backlog-lag was accepted")
	}
}

// srcAdmin is an admin client of the broker at addr, closed with the test.
func srcAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	return adm
}

// srcEmitAll emits from every subtask in turn until they emitted n
// records in all; it returns every value emitted.
func srcEmitAll(t *testing.T, subs []*srcSubtask, n int) []string {
	t.Helper()
	deadline := time.Now().Add(srcWait)
	for {
		var got []string
		for _, s := range subs {
			got = append(got, s.got...)
		}
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records after %s, want %d", len(got), srcWait, n)
		}
		for _, s := range subs {
			s.emit(t)
		}
		time.Sleep(sourceMinBackoff) // as the runtime backs off
	}
}

// TestSourceRestoreWithoutPositions restores a checkpoint taken while the
// topic-pattern matched nothing, so it holds no position: it is still a
// restore, and the partitions created since start at their earliest
// offset, not at starting-offsets: latest, which would skip the records
// written before the failure.
func TestSourceRestoreWithoutPositions(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(1, "other"))
	cfg := srcConfig(addr, "topic-pattern", "^late-", "partition-discovery-interval", "1h", "starting-offsets", "latest")
	a := srcOpen(t, cfg, 0, 1, 0, nil)
	a.emit(t)
	chk := a.checkpoint(t, t.TempDir(), 1)
	_ = a.src.Close()

	ctx, cancel := context.WithTimeout(context.Background(), srcWait)
	defer cancel()
	if _, err := srcAdmin(t, addr).CreateTopic(ctx, 2, 1, nil, "late-a"); err != nil {
		t.Fatal(err)
	}
	// Written before the failure: the failed run may have read them
	// after the checkpoint, so the restored run must read them again.
	want := srcProduce(t, addr, "late-a", 2, 0, 5)

	b := srcOpen(t, cfg, 0, 1, 1, []*weirv1.SubtaskState{chk})
	b.emit(t)
	later := srcProduce(t, addr, "late-a", 2, 5, 8)
	want = append(want, later...)
	// Each partition is read in order, so once the later records came the
	// earlier ones came before them, unless they were skipped.
	deadline := time.Now().Add(srcWait)
	for !srcContainsAll(b.got, later) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records after %s, want at least %v", len(b.got), srcWait, later)
		}
		st, _ := b.emit(t)
		time.Sleep(st.Backoff)
	}
	for range 3 {
		b.emit(t)
	}
	srcInOrder(t, b.got)
	srcSameOnce(t, b.got, want)
}

func srcContainsAll(got, want []string) bool {
	for _, v := range want {
		if !slices.Contains(got, v) {
			return false
		}
	}
	return true
}

// TestSourceRestoredPartitionUnlisted restores while one metadata answer
// leaves a topic out (a broker behind on it, say): its partitions keep
// their restored positions, in the checkpoints taken before the topic is
// listed again (written once, by each partition's owner) and when
// discovery finds it again, instead of starting over at the earliest
// offset.
func TestSourceRestoredPartitionUnlisted(t *testing.T) {
	addr, c := newBroker(t, kfake.SeedTopics(2, "pat-a"), kfake.SeedTopics(3, "pat-b"))
	cfg := srcConfig(addr, "topic-pattern", "^pat-", "partition-discovery-interval", "50ms")
	root := t.TempDir()
	before := append(srcProduce(t, addr, "pat-a", 2, 0, 10), srcProduce(t, addr, "pat-b", 3, 0, 10)...)
	a := srcOpen(t, cfg, 0, 1, 0, nil)
	a.emitUntil(t, len(before))
	srcSameOnce(t, a.got, before)
	chk1 := a.checkpoint(t, root, 1)
	_ = a.src.Close()
	after := append(srcProduce(t, addr, "pat-a", 2, 10, 15), srcProduce(t, addr, "pat-b", 3, 10, 15)...)

	// Both subtasks of the restored run open without pat-b in the listing.
	hide := c.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Metadata}, Topic: "pat-b", Err: kerr.UnknownTopicOrPartition, Count: -1,
		When: func(r kmsg.Request) bool { return r.(*kmsg.MetadataRequest).Topics == nil }, // the pattern's listing
	})
	var subs []*srcSubtask
	for i := range 2 {
		subs = append(subs, srcOpen(t, cfg, i, 2, 1, []*weirv1.SubtaskState{chk1}))
	}
	hide.Remove()
	for _, s := range subs {
		for tp := range s.src.parts {
			if tp.topic == "pat-b" {
				t.Fatalf("subtask %d listed %s at open: the fault did not hide pat-b", s.ctx.subtask, tp)
			}
		}
	}
	// Taken before discovery lists pat-b again.
	var chk2 []*weirv1.SubtaskState
	for _, s := range subs {
		chk2 = append(chk2, s.checkpoint(t, root, 2))
	}
	got := srcEmitAll(t, subs, len(after))
	for range 3 {
		for _, s := range subs {
			s.emit(t)
		}
	}
	got = nil
	for _, s := range subs {
		got = append(got, s.got...)
		srcInOrder(t, s.got)
	}
	srcSameOnce(t, got, after)
	var chk3 []*weirv1.SubtaskState
	for _, s := range subs {
		chk3 = append(chk3, s.checkpoint(t, root, 3))
		_ = s.src.Close()
	}

	// Checkpoint 2 holds pat-b's positions although pat-b was not read
	// yet when it was taken.
	r := srcOpen(t, cfg, 0, 1, 2, chk2)
	r.emitUntil(t, len(after))
	for range 3 {
		r.emit(t)
	}
	srcSameOnce(t, r.got, after)
	_ = r.src.Close()

	// Checkpoint 3, after pat-b was found again, holds one position per
	// partition (a second would fail the open).
	last := append(srcProduce(t, addr, "pat-a", 2, 15, 17), srcProduce(t, addr, "pat-b", 3, 15, 17)...)
	r = srcOpen(t, cfg, 0, 1, 3, chk3)
	r.emitUntil(t, len(last))
	for range 3 {
		r.emit(t)
	}
	srcSameOnce(t, r.got, last)
}

// TestSourceBoundedRestoreFixedPartitions: the partitions of a bounded
// job are those at its first start, so a partition created afterwards is
// not read by a restored run, which ends where the first run would have;
// and the positions it writes for such a partition keep it unread at the
// next restore.
func TestSourceBoundedRestoreFixedPartitions(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(2, "in"))
	cfg := srcConfig(addr, "topic", "in", "bounded", "latest")
	root := t.TempDir()
	want := srcProduce(t, addr, "in", 2, 0, 10)
	a := srcOpen(t, cfg, 0, 1, 0, nil)
	chk1 := a.checkpoint(t, root, 1) // nothing read yet
	_ = a.src.Close()

	ctx, cancel := context.WithTimeout(context.Background(), srcWait)
	defer cancel()
	if _, err := srcAdmin(t, addr).CreatePartitions(ctx, 2, "in"); err != nil {
		t.Fatal(err)
	}
	srcProduce(t, addr, "in", 4, 10, 15) // past the bounded end of in-0 and in-1

	var subs []*srcSubtask
	for i := range 2 {
		subs = append(subs, srcOpen(t, cfg, i, 2, 1, []*weirv1.SubtaskState{chk1}))
	}
	var got []string
	var chk2 []*weirv1.SubtaskState
	for _, s := range subs {
		s.drain(t)
		got = append(got, s.got...)
		for _, id := range s.out.declared {
			if id == "in-2" || id == "in-3" {
				t.Errorf("subtask %d declared split %s, created after the first start", s.ctx.subtask, id)
			}
		}
		chk2 = append(chk2, s.checkpoint(t, root, 2))
		_ = s.src.Close()
	}
	srcSameOnce(t, got, want)

	srcProduce(t, addr, "in", 4, 15, 17)
	r := srcOpen(t, cfg, 0, 1, 2, chk2)
	r.drain(t)
	srcSameOnce(t, r.got, nil)
	if len(r.out.declared) != 0 {
		t.Fatalf("declared %v after everything was read", r.out.declared)
	}
}

// TestBoundedSourceWaitsForUnlistedPartition: a bounded source restored
// while the brokers' metadata leaves out a partition it has a position for
// keeps that position (keepUnlisted) and, although a bounded source
// discovers nothing, lists the partitions again until that one is back:
// it must not report its end of input with records below the partition's
// stop unread.
func TestBoundedSourceWaitsForUnlistedPartition(t *testing.T) {
	addr, c := newBroker(t, kfake.SeedTopics(2, "pat-a"), kfake.SeedTopics(3, "pat-b"))
	cfg := srcConfig(addr, "topic-pattern", "^pat-", "bounded", "latest")
	root := t.TempDir()
	want := append(srcProduce(t, addr, "pat-a", 2, 0, 10), srcProduce(t, addr, "pat-b", 3, 0, 10)...)

	// The first run resolves every partition's stop (10) and checkpoints
	// before reading anything.
	a := srcOpen(t, cfg, 0, 1, 0, nil)
	chk1 := a.checkpoint(t, root, 1)
	_ = a.src.Close()

	// The restored run opens while the metadata leaves pat-b out.
	hide := c.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Metadata}, Topic: "pat-b", Err: kerr.UnknownTopicOrPartition, Count: -1,
		When: func(r kmsg.Request) bool { return r.(*kmsg.MetadataRequest).Topics == nil },
	})
	r := srcOpen(t, cfg, 0, 1, 1, []*weirv1.SubtaskState{chk1})
	hide.Remove()
	if len(r.src.unlisted) != 3 {
		t.Fatalf("unlisted at open: %v, want pat-b's 3 partitions (the fault did not hide pat-b)", r.src.unlisted)
	}
	r.drain(t) // until EndOfInput
	srcSameOnce(t, r.got, want)
}

// TestSourceRelistsUnlistedPartitionWithoutDiscovery: an unbounded
// source without partition discovery, restored while the metadata leaves
// out partitions it has positions for, lists them again until they are
// back and reads them from their positions — not at the next restart —
// and still reads no partition created since (that is discovery's job).
func TestSourceRelistsUnlistedPartitionWithoutDiscovery(t *testing.T) {
	addr, c := newBroker(t, kfake.SeedTopics(2, "pat-a"), kfake.SeedTopics(3, "pat-b"))
	cfg := srcConfig(addr, "topic-pattern", "^pat-", "starting-offsets", "earliest")
	want := append(srcProduce(t, addr, "pat-a", 2, 0, 10), srcProduce(t, addr, "pat-b", 3, 0, 10)...)
	a := srcOpen(t, cfg, 0, 1, 0, nil)
	a.emitUntil(t, len(want))
	chk1 := a.checkpoint(t, t.TempDir(), 1)
	_ = a.src.Close()
	want = append(srcProduce(t, addr, "pat-a", 2, 10, 20), srcProduce(t, addr, "pat-b", 3, 10, 20)...)

	hide := c.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Metadata}, Topic: "pat-b", Err: kerr.UnknownTopicOrPartition, Count: -1,
		When: func(r kmsg.Request) bool { return r.(*kmsg.MetadataRequest).Topics == nil },
	})
	r := srcOpen(t, cfg, 0, 1, 1, []*weirv1.SubtaskState{chk1})
	if len(r.src.unlisted) != 3 {
		t.Fatalf("unlisted at open: %v, want pat-b's 3 partitions (the fault did not hide pat-b)", r.src.unlisted)
	}
	r.emitUntil(t, 20) // pat-a's new records
	if err := c.CreateTopic("pat-c", 1, nil); err != nil {
		t.Fatal(err)
	}
	srcProduce(t, addr, "pat-c", 1, 0, 5)
	hide.Remove()
	r.emitUntil(t, len(want))
	srcSameOnce(t, r.got, want)
	if len(r.src.unlisted) != 0 {
		t.Fatalf("still unlisted: %v", r.src.unlisted)
	}
}

// TestBoundedSourceFailsOnPartitionNeverListed: a restored partition that
// stays unlisted fails the subtask after the wait, naming it, rather than
// finishing without its records or waiting for ever.
func TestBoundedSourceFailsOnPartitionNeverListed(t *testing.T) {
	defer func(w time.Duration) { unlistedWait = w }(unlistedWait)
	unlistedWait = 300 * time.Millisecond
	addr, c := newBroker(t, kfake.SeedTopics(1, "pat-a"), kfake.SeedTopics(1, "pat-b"))
	cfg := srcConfig(addr, "topic-pattern", "^pat-", "bounded", "latest")
	srcProduce(t, addr, "pat-b", 1, 0, 5)
	a := srcOpen(t, cfg, 0, 1, 0, nil)
	chk1 := a.checkpoint(t, t.TempDir(), 1)
	_ = a.src.Close()

	c.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Metadata}, Topic: "pat-b", Err: kerr.UnknownTopicOrPartition, Count: -1,
		When: func(r kmsg.Request) bool { return r.(*kmsg.MetadataRequest).Topics == nil },
	})
	r := srcOpen(t, cfg, 0, 1, 1, []*weirv1.SubtaskState{chk1})
	deadline := time.Now().Add(srcWait)
	for {
		st, err := r.src.Emit(r.out)
		if err != nil {
			if !strings.Contains(err.Error(), "pat-b-0 from offset 0 to 5") {
				t.Fatalf("Emit: %v, want the unlisted partition named", err)
			}
			return
		}
		if st.EndOfInput {
			t.Fatal("end of input with pat-b's records unread")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failure after %s", srcWait)
		}
		time.Sleep(st.Backoff)
	}
}
