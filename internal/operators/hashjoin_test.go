package operators

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// hashJoinSubtask runs a HashJoin the way the task does: each record with
// its key's state through ProcessInput with its input's index.
type hashJoinSubtask struct {
	t   *testing.T
	ctx *testCtx
	op  *HashJoin
	out *collector
}

func newHashJoinSubtask(t *testing.T, subtask, parallelism int, ctx *testCtx) *hashJoinSubtask {
	t.Helper()
	if ctx == nil {
		ctx = newTestCtx("hash-join", nil, subtask, parallelism)
	}
	j := &hashJoinSubtask{t: t, ctx: ctx, op: &HashJoin{}, out: &collector{}}
	if err := j.op.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	return j
}

func (j *hashJoinSubtask) record(input int, key string, ts, v int64) {
	j.t.Helper()
	j.ctx.Heap.SetCurrentKey([]byte(key))
	r := sdk.Record{Key: []byte(key), Value: []byte(strconv.FormatInt(v, 10)), Timestamp: ts}
	if err := j.op.ProcessInput(input, r, j.out); err != nil {
		j.t.Fatalf("process input %d %s@%d: %v", input, key, ts, err)
	}
}

// TestHashJoinMatchesBatch joins records of both sides, some repeated
// (same value and timestamp), in any order of time, with checkpoints
// restored at other parallelisms on the way, and compares the pairs with
// a batch join of every left and right record of a key: each pair exactly
// once, at the later of its two timestamps.
func TestHashJoinMatchesBatch(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		keys := [2][]string{{"a", "b", "c", "l"}, {"a", "b", "c", "r"}}
		type event struct {
			input int
			rec   check.Record
		}
		var events []event
		var sides [2][]check.Record
		ts := [2]map[int64]int64{{}, {}} // value → timestamp
		for i := range 600 {
			in := rng.IntN(2)
			r := check.Record{Key: keys[in][rng.IntN(4)], Timestamp: int64(rng.IntN(100)), Value: int64(i)}
			if i%10 == 9 { // a repeat of an earlier record of its side
				if s := sides[in]; len(s) > 0 {
					r = s[rng.IntN(len(s))]
				}
			}
			events = append(events, event{in, r})
			sides[in] = append(sides[in], r)
			ts[in][r.Value] = r.Timestamp
		}
		want := map[string]int{}
		for _, l := range sides[0] {
			for _, r := range sides[1] {
				if l.Key == r.Key {
					want[l.Key+","+strconv.FormatInt(l.Value, 10)+"|"+strconv.FormatInt(r.Value, 10)]++
				}
			}
		}
		parallelism := 2
		subs := make([]*hashJoinSubtask, parallelism)
		for i := range subs {
			subs[i] = newHashJoinSubtask(t, i, parallelism, nil)
		}
		var lines []string
		collect := func() {
			for _, s := range subs {
				recs := s.out.take()
				for _, r := range recs {
					lv, rv, _ := strings.Cut(string(r.Value), "|")
					l, _ := strconv.ParseInt(lv, 10, 64)
					rr, _ := strconv.ParseInt(rv, 10, 64)
					if w := max(ts[0][l], ts[1][rr]); r.Timestamp != w {
						t.Fatalf("seed %d: pair %s,%s has timestamp %d, want %d", seed, r.Key, r.Value, r.Timestamp, w)
					}
				}
				lines = append(lines, joinLines(recs)...)
			}
		}
		root := t.TempDir()
		var id int64
		for i, e := range events {
			kg := keygroup.Of([]byte(e.rec.Key), testMaxParallelism)
			subs[keygroup.OperatorIndex(kg, testMaxParallelism, len(subs))].record(e.input, e.rec.Key, e.rec.Timestamp, e.rec.Value)
			if i%150 == 149 {
				collect()
				id++
				var prev []*weirv1.SubtaskState
				for _, s := range subs {
					prev = append(prev, s.ctx.Checkpoint(t, s.op, root, id))
				}
				parallelism = 1 + (parallelism+rng.IntN(2))%3 // another of 1, 2, 3
				subs = make([]*hashJoinSubtask, parallelism)
				for j := range subs {
					subs[j] = newHashJoinSubtask(t, j, parallelism, restoreTestCtx(t, "hash-join", nil, j, parallelism, int(id), id, prev))
				}
			}
		}
		collect()
		if len(want) < 100 {
			t.Fatalf("seed %d: only %d distinct pairs: the test joins too little to tell", seed, len(want))
		}
		if err := check.Joins(lines, want); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func TestHashJoinInputs(t *testing.T) {
	j := newHashJoinSubtask(t, 0, 1, nil)
	if err := j.op.ProcessRecord(sdk.Record{Key: []byte("k")}, j.out); err == nil {
		t.Error("ProcessRecord without an input succeeded")
	}
	if err := j.op.ProcessInput(2, sdk.Record{Key: []byte("k")}, j.out); err == nil || !strings.Contains(err.Error(), "input 2") {
		t.Errorf("ProcessInput(2) = %v, want an error naming input 2", err)
	}
}

// TestJoinSkipPair: a pair its Pairer skips emits nothing and the join
// goes on, in every join; any other error of the Pairer fails it.
func TestJoinSkipPair(t *testing.T) {
	// Pairs of an odd left value are skipped, those of left value 4 fail.
	pair := func(key, lv, rv []byte, ts int64) (sdk.Record, error) {
		v, _ := strconv.Atoi(string(lv))
		switch {
		case v == 4:
			return sdk.Record{}, errors.New("boom")
		case v%2 == 1:
			return sdk.Record{}, SkipPair
		}
		return joinValues(key, lv, rv, ts)
	}
	want := map[string]int{"k,2|10": 1}
	t.Run("hash", func(t *testing.T) {
		j := newHashJoinSubtask(t, 0, 1, nil)
		j.op.Pair = pair
		j.record(leftInput, "k", 1, 1)
		j.record(leftInput, "k", 1, 2)
		j.record(rightInput, "k", 1, 10)
		if err := check.Joins(joinLines(j.out.take()), want); err != nil {
			t.Fatal(err)
		}
		err := j.op.ProcessInput(leftInput, sdk.Record{Key: []byte("k"), Value: []byte("4")}, j.out)
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("pairing a failing pair: %v, want the Pairer's error", err)
		}
	})
	for _, tc := range []struct {
		operator string
		cfg      sdk.Config
	}{
		{"interval-join", sdk.Config{"lower": "0s", "upper": "0s"}},
		{"window-join", sdk.Config{"size": "10ms"}},
	} {
		t.Run(tc.operator, func(t *testing.T) {
			j := newJoinSubtask(t, tc.operator, tc.cfg, 0, 1, nil)
			switch op := j.op.(type) {
			case *IntervalJoin:
				op.Pair = pair
			case *WindowJoin:
				op.Pair = pair
			}
			j.left("k", 1, 1)
			j.left("k", 1, 2)
			j.right("k", 1, 10)
			j.watermark(sdk.MaxWatermark)
			if err := check.Joins(joinLines(j.out.take()), want); err != nil {
				t.Fatal(err)
			}
		})
	}
}
