package ops

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// A compound-failure harness: a keyed SQL operator (the head) with an
// optional stateless calc chained after it (the tail), writing to an
// upsert "topic" through an exactly-once sink. Barriers call
// PrepareSnapshotPreBarrier on the head then the tail (as the runtime
// does along a chain), snapshot the head and commit what the sink got;
// a failure drops the uncommitted output and the subtasks, restores the
// head at another parallelism from the last checkpoint and replays the
// input from there; the end calls EndInput head then tail and commits.

type chainStep struct {
	rec   *sdk.Record
	clock int64 // > 0: the processing-time clock moves here
}

type chainSub struct {
	head, tail *subtask
}

type chainRun struct {
	t        testing.TB
	newHead  func() sdk.Operator
	headCfg  sdk.Config
	tailCfg  sdk.Config // nil: no tail
	subs     []chainSub
	now      int64
	pending  []sdk.Record // the sink's open transaction
	commited []sdk.Record
}

func (c *chainRun) open(par int, states []*weirv1.SubtaskState) {
	c.subs = make([]chainSub, par)
	for i := range c.subs {
		var ctx *sdktest.Context
		if states != nil {
			ctx = sdktest.Restore(c.t, "sql", c.headCfg, i, par, 1, 1, states)
		}
		c.subs[i].head = newSubtask(c.t, c.newHead(), c.headCfg, i, par, ctx)
		c.subs[i].head.timers.nowMs = c.now
		if c.tailCfg != nil {
			c.subs[i].tail = newSubtask(c.t, &Calc{}, c.tailCfg, i, par, nil)
		}
	}
}

// drain moves what subtask s's head emitted through its tail to the sink.
func (c *chainRun) drain(s chainSub) {
	out := s.head.take()
	if s.tail == nil {
		c.pending = append(c.pending, out...)
		return
	}
	for _, r := range out {
		s.tail.record(-1, r)
	}
	c.pending = append(c.pending, s.tail.take()...)
}

func (c *chainRun) step(e chainStep) {
	c.t.Helper()
	if e.clock > 0 {
		c.now = e.clock
		for _, s := range c.subs {
			s.head.clock(e.clock)
			c.drain(s)
		}
		return
	}
	kg := keygroup.Of(e.rec.Key, sdktest.MaxParallelism)
	s := c.subs[keygroup.OperatorIndex(kg, sdktest.MaxParallelism, len(c.subs))]
	s.head.record(-1, *e.rec)
	c.drain(s)
}

// barrier takes a checkpoint: what precedes it is committed.
func (c *chainRun) barrier(root string, id int64) []*weirv1.SubtaskState {
	c.t.Helper()
	var states []*weirv1.SubtaskState
	for _, s := range c.subs {
		if err := s.head.op.(sdk.PreBarrierHook).PrepareSnapshotPreBarrier(id, s.head); err != nil {
			c.t.Fatal(err)
		}
		c.drain(s)
		if s.tail != nil {
			if err := s.tail.op.(sdk.PreBarrierHook).PrepareSnapshotPreBarrier(id, s.tail); err != nil {
				c.t.Fatal(err)
			}
			c.pending = append(c.pending, s.tail.take()...)
		}
		states = append(states, s.head.ctx.Checkpoint(c.t, s.head.op, root, id))
	}
	c.commited = append(c.commited, c.pending...)
	c.pending = nil
	return states
}

func (c *chainRun) end() {
	c.t.Helper()
	for _, s := range c.subs {
		if err := s.head.op.(sdk.InputEnder).EndInput(s.head); err != nil {
			c.t.Fatal(err)
		}
		c.drain(s)
		if s.tail != nil {
			if err := s.tail.op.(sdk.InputEnder).EndInput(s.tail); err != nil {
				c.t.Fatal(err)
			}
			c.pending = append(c.pending, s.tail.take()...)
		}
	}
	c.commited = append(c.commited, c.pending...)
	c.pending = nil
}

// runChain runs steps with a checkpoint after a random ~1/8 of them and
// a failure after a random ~1/25 (each restoring at parallelism 1 to 4),
// and returns the committed records.
func runChain(t testing.TB, rnd *rand.Rand, newHead func() sdk.Operator, headCfg, tailCfg sdk.Config, steps []chainStep) []sdk.Record {
	t.Helper()
	c := &chainRun{t: t, newHead: newHead, headCfg: headCfg, tailCfg: tailCfg}
	c.open(1, nil)
	root := t.TempDir()
	var states []*weirv1.SubtaskState
	at, id, failures := 0, int64(0), 0
	for i := 0; i < len(steps); i++ {
		c.step(steps[i])
		switch n := rnd.IntN(25); {
		case n < 3:
			id++
			states = c.barrier(root, id)
			at = i + 1
		case n == 3 && failures < 6:
			failures++
			// The open transaction aborts; the job restarts from the
			// last checkpoint (or from the beginning without one).
			c.pending = nil
			c.open(1+rnd.IntN(4), states)
			i = at - 1
		}
	}
	c.end()
	return c.commited
}

// upsertTable applies an upsert topic's records: a record with an empty
// value is a tombstone.
func upsertTable(recs []sdk.Record) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		if len(r.Value) == 0 {
			delete(m, string(r.Key))
			continue
		}
		m[string(r.Key)] = string(r.Value)
	}
	return m
}

func tableDiff(got, want map[string]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if want[k] != got[k] {
			lines = append(lines, fmt.Sprintf("key %q: got %q, want %q", k, got[k], want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			lines = append(lines, fmt.Sprintf("key %q: missing, want %q", k, want[k]))
		}
	}
	return strings.Join(lines, "\n")
}

// TestCompoundGroupAggUpsert: a GROUP BY over a random changelog, its
// upsert output written by the aggregate itself or by a filtering calc
// chained after it (whose -U waits for the next change, and whose +U the
// filter may drop), with mini-batches ended by size, latency timers and
// barriers, checkpoints and failures restoring at other parallelisms:
// the committed upsert topic is the table of the groups' final rows.
func TestCompoundGroupAggUpsert(t *testing.T) {
	out := schema("g", tVarchar, "n", tBigint, "sum", tBigint)
	for _, tc := range []struct {
		name      string
		tail      bool
		miniBatch plan.MiniBatch
	}{
		{"agg upsert", false, plan.MiniBatch{}},
		{"agg upsert mini-batch", false, plan.MiniBatch{Size: 3, Latency: 4}},
		{"agg changelog, calc upsert", true, plan.MiniBatch{}},
		{"agg changelog mini-batch, calc upsert", true, plan.MiniBatch{Size: 3, Latency: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := gaPlan(gaRetractIn, true, []int{0}, agg(plan.Count, -1, -1, tBigint), agg(plan.Sum, 1, -1, tBigint))
			p.MiniBatch = tc.miniBatch
			upsert := plan.Encoding{Format: plan.FormatCSV, Sink: plan.SinkUpsert, Key: []int{0}, KeyFormat: plan.FormatCSV}
			var tailCfg sdk.Config
			// The calc keeps the groups of an odd count.
			odd := plan.Call("<>", tBool, plan.Call("%", tBigint, col(1, tBigint), lit(tBigint, "2")), lit(tBigint, "0"))
			if tc.tail {
				tailCfg = config(t, &plan.Operator{Calc: &plan.Calc{
					In:     plan.Decoding{Format: plan.FormatRow, Schema: out, Timestamp: -1, Changelog: true},
					Filter: &odd, Out: out, Enc: upsert,
				}})
			} else {
				p.Enc = upsert
			}
			headCfg := config(t, &plan.Operator{GroupAgg: p})
			for seed := range uint64(16) {
				events, live := gaStream(p, 300)
				rnd := rand.New(rand.NewPCG(seed, 99))
				var steps []chainStep
				clock := int64(0)
				for _, e := range events {
					r := e.rec
					steps = append(steps, chainStep{rec: &r})
					if rnd.IntN(4) == 0 {
						clock += 1 + rnd.Int64N(3)
						steps = append(steps, chainStep{clock: clock})
					}
				}
				got := upsertTable(runChain(t, rnd, newGroupAggregate, headCfg, tailCfg, steps))
				want := map[string]string{}
				for g, rows := range live {
					if len(rows) == 0 || (tc.tail && len(rows)%2 == 0) {
						continue
					}
					var sum int64
					nx := 0
					for _, r := range rows {
						if !r[1].IsNull() {
							sum, nx = sum+r[1].Int(), nx+1
						}
					}
					s := fmt.Sprint(sum)
					if nx == 0 {
						s = ""
					}
					want[g] = fmt.Sprintf("%s,%d,%s", g, len(rows), s)
				}
				if d := tableDiff(got, want); d != "" {
					t.Fatalf("seed %d: the upsert topic differs:\n%s", seed, d)
				}
			}
		})
	}
}

// TestCompoundTopNUpsert: a ranked top 3 (upsert keyed by the partition
// and the row number) and a deduplication (keyed by the partition) of a
// random changelog, written by the TopN or by a calc chained after it,
// through checkpoints and failures restoring at other parallelisms, with
// a TTL's timers (too long to expire anything) firing between records:
// the committed upsert topic is the brute-force top.
func TestCompoundTopNUpsert(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *plan.TopN
		tail bool
	}{
		{"ranked", topPlan(3, true, true, topAsc(1)), false},
		{"ranked, calc", topPlan(3, true, true, topAsc(1)), true},
		{"deduplicated", topPlan(1, false, true, topDesc(1)), false},
		{"deduplicated, calc", topPlan(1, false, true, topDesc(1)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *tc.p
			p.TTL = 1000
			key := []int{0}
			if p.Rank {
				key = []int{0, 3}
			}
			upsert := plan.Encoding{Format: plan.FormatCSV, Sink: plan.SinkUpsert, Key: key, KeyFormat: plan.FormatCSV}
			var tailCfg sdk.Config
			if tc.tail {
				tailCfg = config(t, &plan.Operator{Calc: &plan.Calc{
					In:  plan.Decoding{Format: plan.FormatRow, Schema: p.Out, Timestamp: -1, Changelog: true},
					Out: p.Out, Enc: upsert,
				}})
			} else {
				p.Enc = upsert
			}
			headCfg := config(t, &plan.Operator{TopN: &p})
			for seed := range uint64(8) {
				rnd := rand.New(rand.NewPCG(seed, 7))
				topSteps := topRandomSteps(rnd, 200, true)
				var steps []chainStep
				clock := int64(0)
				for _, e := range topEvents(true, topSteps) {
					r := e.rec
					steps = append(steps, chainStep{rec: &r})
					if rnd.IntN(3) == 0 {
						clock += 1 + rnd.Int64N(3)
						steps = append(steps, chainStep{clock: clock})
					}
				}
				got := slices.Sorted(maps.Values(upsertTable(runChain(t, rnd, newTopN, headCfg, tailCfg, steps))))
				ref := topReference(tc.p, topSteps)
				var want []string
				if p.Rank {
					want = slices.Sorted(maps.Values(ref))
				} else {
					want = slices.Sorted(maps.Keys(ref))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d: the upsert topic\n%s\nwant\n%s", seed, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
		})
	}
}

// TestUpsertNullRowIsNoTombstone: an upsert output's one column (SELECT
// DISTINCT g, a GROUP BY g without aggregates) in CSV: the row of the
// NULL group encodes to an empty value, which the Kafka sink writes as a
// tombstone (and an upsert source reads as one), so its +I would delete
// its key instead of writing its row. Its -D must still be a tombstone,
// and the topic must read back, through an upsert source's calc, as the
// NULL row.
func TestUpsertNullRowIsNoTombstone(t *testing.T) {
	in := schema("g", tVarchar)
	p := gaPlan(in, false, []int{0})
	p.InChangelog = true
	p.Enc = plan.Encoding{Format: plan.FormatCSV, Sink: plan.SinkUpsert, Key: []int{0}, KeyFormat: plan.FormatCSV}
	s := newSubtask(t, &GroupAggregate{}, config(t, &plan.Operator{GroupAgg: p}), 0, 1, nil)
	s.record(-1, gaRecord(p, 0, row.Row{row.Null()}, 1))
	s.record(-1, gaRecord(p, 0, row.Row{row.Str("a")}, 2))
	topic := s.take()
	if got := upsertTable(topic); len(got) != 2 {
		t.Fatalf("the upsert topic holds %q, want the rows of NULL and a", got)
	}
	// Read back as an upsert source: the NULL row, not a deletion.
	src := &Calc{}
	if err := src.open(&plan.Calc{In: plan.Decoding{Format: plan.FormatCSV, Schema: in, Timestamp: -1, Key: []int{0}, KeyFormat: plan.FormatCSV},
		Out: in, Enc: plan.Encoding{Format: plan.FormatRow, Changelog: true, Key: []int{0}}}, nil); err != nil {
		t.Fatal(err)
	}
	var read collector
	if err := src.ProcessRecord(topic[0], &read); err != nil {
		t.Fatal(err)
	}
	if got := topNChanges(t, in, read.records); len(got) != 1 || got[0] != "1: +U " {
		t.Fatalf("the NULL row read back as %q, want +U of NULL", got)
	}
	// Its retraction is a tombstone.
	s.record(-1, gaRecord(p, row.Delete, row.Row{row.Null()}, 3))
	if tomb := s.take(); len(tomb) != 1 || len(tomb[0].Value) != 0 || string(tomb[0].Key) != "" {
		t.Fatalf("the NULL row's deletion: %+v, want a tombstone of key \"\"", tomb)
	}
}

// TestUpsertPendingEmptyKey: the -U held for a key that encodes to
// nothing (a CSV key of a NULL) is flushed as its tombstone like any
// other: by the next change of another key, before a barrier.
func TestUpsertPendingEmptyKey(t *testing.T) {
	s := schema("g", tVarchar, "n", tBigint)
	enc, err := newEncoder(s, plan.Encoding{Format: plan.FormatCSV, Sink: plan.SinkUpsert, Key: []int{0}, KeyFormat: plan.FormatCSV})
	if err != nil {
		t.Fatal(err)
	}
	var out collector
	enc.emit(&out, row.UpdateBefore, row.Row{row.Null(), row.Int(1)}, 1)
	enc.emit(&out, row.Insert, row.Row{row.Str("a"), row.Int(1)}, 2)
	enc.emit(&out, row.UpdateBefore, row.Row{row.Null(), row.Int(1)}, 3)
	enc.flush(&out)
	var got []string
	for _, r := range out.records {
		got = append(got, fmt.Sprintf("%d %q=%q", r.Timestamp, r.Key, r.Value))
	}
	want := []string{`1 ""=""`, `2 "a"="a,1"`, `3 ""=""`}
	if !slices.Equal(got, want) {
		t.Fatalf("records %q, want %q", got, want)
	}
}
