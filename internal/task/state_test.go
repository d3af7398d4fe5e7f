package task

import (
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/sdk"
)

// The operator's context hands out the backend's keyed states, scoped by
// the backend's current key.
func TestOpContextKeyedState(t *testing.T) {
	be := state.NewHeap(128, keygroup.RangeFor(128, 1, 0))
	var ctx sdk.Context = &opContext{t: &Task{backend: be}}
	m := ctx.MapState("m")
	r := ctx.ReducingState("r", func(acc, v []byte) []byte { return append(append([]byte(nil), acc...), v...) })
	be.SetCurrentKey([]byte("a"))
	m.Put([]byte("x"), []byte("1"))
	r.Add([]byte("a"))
	r.Add([]byte("b"))
	be.SetCurrentKey([]byte("b"))
	if !m.IsEmpty() {
		t.Fatal("map state not scoped by key")
	}
	be.SetCurrentKey([]byte("a"))
	if v, ok := ctx.MapState("m").Get([]byte("x")); !ok || string(v) != "1" {
		t.Fatalf("map state %q %v", v, ok)
	}
	if v, _ := r.Get(); string(v) != "ab" {
		t.Fatalf("reducing state %q", v)
	}
}
