package operators

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

type sumSubtask struct {
	ctx *testCtx
	op  *KeyedSum
	out collector
}

func openSum(t *testing.T, ctx *testCtx) *sumSubtask {
	t.Helper()
	k := &KeyedSum{}
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	return &sumSubtask{ctx: ctx, op: k}
}

func TestKeyedSum(t *testing.T) {
	type rec struct{ key, value string }
	tests := []struct {
		name string
		in   []rec
		want []string // emitted key=sum, in order
	}{
		{"single key", []rec{{"a", "1"}, {"a", "2"}, {"a", "3"}}, []string{"a=1", "a=3", "a=6"}},
		{"keys are independent", []rec{{"a", "1"}, {"b", "10"}, {"a", "2"}, {"b", "-20"}}, []string{"a=1", "b=10", "a=3", "b=-10"}},
		{"zero and negative", []rec{{"x", "0"}, {"x", "-5"}, {"x", "+7"}}, []string{"x=0", "x=-5", "x=2"}},
		{"empty key", []rec{{"", "4"}, {"", "4"}}, []string{"=4", "=8"}},
		{"large values", []rec{{"k", "9223372036854775000"}, {"k", "807"}}, []string{"k=9223372036854775000", "k=9223372036854775807"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openSum(t, newTestCtx("sum", nil, 0, 1))
			var got []string
			for i, r := range tc.in {
				if err := s.ctx.Process(t, s.op, sdk.Record{Key: []byte(r.key), Value: []byte(r.value), Timestamp: int64(i)}, &s.out); err != nil {
					t.Fatal(err)
				}
				for _, o := range s.out.take() {
					if o.Timestamp != int64(i) {
						t.Fatalf("output %q has timestamp %d, want the input's %d", o.Value, o.Timestamp, i)
					}
					got = append(got, string(o.Key)+"="+string(o.Value))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("emitted %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKeyedSumBadValue(t *testing.T) {
	for _, v := range []string{"", "1.5", "abc", " 1", "99999999999999999999"} {
		t.Run(strconv.Quote(v), func(t *testing.T) {
			s := openSum(t, newTestCtx("sum", nil, 0, 1))
			if err := s.ctx.Process(t, s.op, sdk.Record{Key: []byte("the-key"), Value: []byte("5")}, &s.out); err != nil {
				t.Fatal(err)
			}
			s.out.take()
			err := s.ctx.Process(t, s.op, sdk.Record{Key: []byte("the-key"), Value: []byte(v)}, &s.out)
			if err == nil || !strings.Contains(err.Error(), `key "the-key"`) {
				t.Fatalf("value %q: %v, want an error naming the key", v, err)
			}
			if n := len(s.out.take()); n != 0 {
				t.Fatalf("emitted %d records for a bad value", n)
			}
			// The sum is untouched.
			if err := s.ctx.Process(t, s.op, sdk.Record{Key: []byte("the-key"), Value: []byte("1")}, &s.out); err != nil {
				t.Fatal(err)
			}
			if out := s.out.take(); len(out) != 1 || string(out[0].Value) != "6" {
				t.Fatalf("after a bad value: %v, want sum 6", out)
			}
		})
	}
}

func TestKeyedSumCorruptState(t *testing.T) {
	ctx := newTestCtx("sum", nil, 0, 1)
	s := openSum(t, ctx)
	ctx.Heap.SetCurrentKey([]byte("k"))
	ctx.Heap.ValueState("sum").Update([]byte("not a number"))
	err := ctx.Process(t, s.op, sdk.Record{Key: []byte("k"), Value: []byte("1")}, &s.out)
	if err == nil || !strings.Contains(err.Error(), `corrupt state of key "k"`) {
		t.Fatalf("got %v, want a corrupt state error naming the key", err)
	}
}

// Sums survive a snapshot and a restore, also at another parallelism:
// records go to the subtask owning their key group, as a hash edge routes
// them.
func TestKeyedSumSnapshotRestore(t *testing.T) {
	const keys = 50
	for _, tc := range []struct{ from, to int }{{1, 1}, {2, 2}, {2, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("%d to %d", tc.from, tc.to), func(t *testing.T) {
			root := t.TempDir()
			want := map[string]int64{}
			feed := func(subs []*sumSubtask, round int) {
				p := len(subs)
				for k := range keys {
					key := []byte(fmt.Sprint("key-", k))
					v := int64(k*round + 1)
					want[string(key)] += v
					s := subs[keygroup.OperatorIndex(keygroup.Of(key, testMaxParallelism), testMaxParallelism, p)]
					if err := s.ctx.Process(t, s.op, sdk.Record{Key: key, Value: []byte(fmt.Sprint(v))}, &s.out); err != nil {
						t.Fatal(err)
					}
					out := s.out.take()
					if len(out) != 1 || string(out[0].Value) != fmt.Sprint(want[string(key)]) {
						t.Fatalf("round %d key %s: emitted %v, want sum %d", round, key, out, want[string(key)])
					}
				}
			}
			var subs []*sumSubtask
			for i := range tc.from {
				subs = append(subs, openSum(t, newTestCtx("sum", nil, i, tc.from)))
			}
			feed(subs, 1)
			feed(subs, 2)
			var prev []*weirv1.SubtaskState
			for _, s := range subs {
				prev = append(prev, s.ctx.Checkpoint(t, s.op, root, 1))
			}
			// Records after the checkpoint are lost with the crash.
			lost := map[string]int64{}
			for k, v := range want {
				lost[k] = v
			}
			feed(subs, 3)
			want = lost

			subs = nil
			for i := range tc.to {
				subs = append(subs, openSum(t, restoreTestCtx(t, "sum", nil, i, tc.to, 1, 1, prev)))
			}
			feed(subs, 4)
		})
	}
}
