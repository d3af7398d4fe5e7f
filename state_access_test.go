package weir

import (
	"testing"

	"github.com/weirproject/weir/internal/sdktest"
	"github.com/weirproject/weir/sdk"
)

type accessed struct {
	Start, Expires, Category int64
	Closed                   bool
}

func newAccessScope() *ttlScope {
	c := sdktest.NewContext("v", nil, 0, 1)
	k := &keyedScope{ctx: c, schema: openSchema(c, "v"), values: map[string]sdk.ValueState{}, maps: map[string]sdk.MapState{}}
	return &ttlScope{c: c, k: k}
}

// A state's type name and layout are built by reflection (the layout
// through a JSON encoding) once per scope when it is declared. Built on
// every access instead, they were a third of Nexmark q4's time.
func TestStateAccessDoesNotDescribeAgain(t *testing.T) {
	s := newAccessScope()
	v := NewValueState[accessed]("v")
	m := NewMapState[string, accessed]("m")
	l := NewListState[accessed]("l")
	s.c.Heap.SetCurrentKey([]byte("k"))
	v.Update(s, accessed{Start: 1})
	m.Put(s, "a", accessed{Start: 1})
	l.Add(s, accessed{Start: 1})
	allocs := testing.AllocsPerRun(100, func() {
		v.Value(s)
		m.Get(s, "a")
		l.Clear(s)
	})
	// Decoding v's value allocates nothing for a flat struct; a layout
	// built per access would cost dozens.
	if allocs > 4 {
		t.Fatalf("reading keyed state allocated %.0f times per access round", allocs)
	}
}

func BenchmarkValueStateReadUpdate(b *testing.B) {
	s := newAccessScope()
	v := NewValueState[accessed]("v")
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.c.Heap.SetCurrentKey(keys[i%len(keys)])
		a, _ := v.Value(s)
		a.Start++
		v.Update(s, a)
	}
}
