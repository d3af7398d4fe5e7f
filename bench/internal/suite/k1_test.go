package suite

import (
	"math"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestK1Spec checks that K1's job is valid, transaction timeout included
// (the validation refuses one shorter than the checkpoint timeout plus the
// restart delay), and has the shape the benchmark describes.
func TestK1Spec(t *testing.T) {
	spec := k1Spec("k1-1", "127.0.0.1:9092", "k1-out-1", "k1-1")
	g, err := jobgraph.ParseSpec([]byte(spec))
	if err != nil {
		t.Fatalf("%v\n%s", err, spec)
	}
	want := []struct {
		name, op, from string
	}{{"source", "kafka-source", ""}, {"map", "bench-map", "source"}, {"sink", "kafka-sink", "map"}}
	if len(g.Vertices) != len(want) {
		t.Fatalf("%d vertices, want %d", len(g.Vertices), len(want))
	}
	for i, w := range want {
		v := g.Vertices[i]
		if v.Name != w.name || v.Operator != w.op || v.Parallelism != 2 {
			t.Errorf("vertex %d: %s %s p=%d, want %s %s p=2", i, v.Name, v.Operator, v.Parallelism, w.name, w.op)
		}
		if w.from != "" && (len(v.Inputs) != 1 || v.Inputs[0].Source != w.from || v.Inputs[0].Partitioner != weirv1.Partitioner_PARTITIONER_FORWARD) {
			t.Errorf("vertex %s: inputs %v, want forward from %s", v.Name, v.Inputs, w.from)
		}
	}
	cfg := g.Vertices[2].Config.AsMap()
	if cfg["delivery"] != "exactly-once" || cfg["transactional-id-prefix"] != "k1-1" || cfg["topic"] != "k1-out-1" {
		t.Errorf("sink config %v", cfg)
	}
	src := g.Vertices[0].Config.AsMap()
	if src["bounded"] != "latest" || src["starting-offsets"] != "earliest" || src["topic"] != k1In {
		t.Errorf("source config %v", src)
	}
	if iv := g.Checkpointing.GetInterval().AsDuration(); iv.Seconds() != 1 {
		t.Errorf("checkpoint interval %v, want 1s", iv)
	}
	// The timeout is what makes the spec valid: a shorter one is refused.
	short := strings.Replace(spec, "transaction-timeout: 1m}", "transaction-timeout: 10s}", 1)
	if short == spec {
		t.Fatalf("no transaction-timeout: 1m in\n%s", spec)
	}
	if _, err := jobgraph.ParseSpec([]byte(short)); err == nil || !strings.Contains(err.Error(), "transaction-timeout") {
		t.Errorf("a 10s transaction timeout was not refused: %v", err)
	}
}

func TestK1Combined(t *testing.T) {
	// 1 µs per record consuming plus 3 µs producing: 4 µs, 250 k/s/core.
	if got := k1Combined(1e6, 1e6/3); math.Abs(got-250e3) > 1e-6 {
		t.Errorf("k1Combined = %v, want 250000", got)
	}
	if got := k1Combined(2e6, 2e6); got != 1e6 {
		t.Errorf("k1Combined = %v, want 1e6", got)
	}
	if k1Combined(0, 1) != 0 {
		t.Error("k1Combined without a consume floor is not 0")
	}
}

func TestK1Values(t *testing.T) {
	for _, i := range []int64{0, 7, 1234567, 9_999_999_999_999_999} {
		v := k1Value(i)
		if len(v) != k1ValueLen {
			t.Fatalf("k1Value(%d) = %q", i, v)
		}
		if got, ok := k1Seq(v); !ok || got != i {
			t.Errorf("k1Seq(%q) = %d, %v", v, got, ok)
		}
	}
	for _, bad := range []string{"", "12", "00000000000000x1", "00000000000000001"} {
		if _, ok := k1Seq([]byte(bad)); ok {
			t.Errorf("k1Seq(%q) accepted", bad)
		}
	}
	tl := newK1Tally(100)
	for i := int64(0); i < 100; i++ {
		if i != 42 {
			tl.add(k1Value(i))
		}
	}
	tl.add(k1Value(7))   // duplicate
	tl.add(k1Value(100)) // not from the input
	tl.add([]byte("junk"))
	c := tl.result()
	if c.Read != 102 || c.Missing != 1 || c.Duplicates != 1 || c.Foreign != 2 || c.ok() {
		t.Errorf("tally %+v", c)
	}
	full := newK1Tally(3)
	for i := int64(0); i < 3; i++ {
		full.add(k1Value(i))
	}
	if c := full.result(); !c.ok() || c.Read != 3 {
		t.Errorf("tally %+v", c)
	}
}
