package operators

import (
	"testing"

	"github.com/weirproject/weir/sdk"
)

// discard counts what an operator emits and keeps nothing.
type discard struct{ n int }

func (d *discard) Collect(sdk.Record) { d.n++ }

// BenchmarkSequenceSourceEmit is the source of the running-sum job at full
// speed: one op is one record.
func BenchmarkSequenceSourceEmit(b *testing.B) {
	ctx := newTestCtx("src", sdk.Config{"keys": 16.0}, 0, 1)
	s := &SequenceSource{}
	if err := s.Open(ctx); err != nil {
		b.Fatal(err)
	}
	out := &discard{}
	b.ReportAllocs()
	for b.Loop() {
		if out.n%maxPerEmit == 0 {
			if _, err := s.Emit(out); err != nil {
				b.Fatal(err)
			}
		}
		out.n++
	}
}

// BenchmarkKeyedSum is keyed-sum on the heap backend over 16 keys.
func BenchmarkKeyedSum(b *testing.B) {
	ctx := newTestCtx("sum", sdk.Config{}, 0, 1)
	k := &KeyedSum{}
	if err := k.Open(ctx); err != nil {
		b.Fatal(err)
	}
	recs := make([]sdk.Record, 16)
	for i := range recs {
		recs[i] = sdk.Record{Key: []byte{byte('a' + i)}, Value: []byte("12345")}
	}
	out := &discard{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := recs[i%len(recs)]
		i++
		ctx.heap.SetCurrentKey(r.Key)
		if err := k.ProcessRecord(r, out); err != nil {
			b.Fatal(err)
		}
	}
}
