// Package goapijob is benchmark G1's job written with the Go API (package
// weir): the harness builds its graph in-process to submit it, and
// bench-goapi (bench/cmd/bench-goapi) is the program whose TaskManagers
// run it. Both call Job, so the vertices' signatures agree.
package goapijob

import (
	"time"

	"github.com/weirproject/weir"
)

// Keys is the number of distinct keys, as sequence-source's keys: 1024 in
// the built-in job G1 compares with.
const Keys = 1024

// Parallelism of every vertex.
const Parallelism = 2

// Vertex names; the built-in job uses the same, so the records into the
// reduce stage are the task "sum"'s in both.
const (
	Source = "source"
	Map    = "map"
	Sum    = "sum"
	Sink   = "sink"
)

// Job is Generate(i → i, unbounded, full speed) → Map(i → i+1) →
// KeyBy(i mod 1024) → Reduce(sum) → Discard, every vertex at parallelism
// 2, checkpoints every second (as B5's jobs).
func Job() *weir.Job {
	p := weir.Parallelism(Parallelism)
	job := weir.NewJob("g1-goapi", weir.Checkpointing(time.Second), weir.RetainedCheckpoints(1))
	src := weir.FromSource(job, Source, weir.Generate(0, func(i int64) int64 { return i }), p)
	inc := weir.Map(src, Map, func(i int64) int64 { return i + 1 }, p)
	keyed := weir.KeyBy(inc, func(i int64) int64 { return i % Keys })
	sums := weir.Reduce(keyed, Sum, func(acc, v int64) int64 { return acc + v }, p)
	weir.SinkTo(sums, Sink, weir.Discard[int64](), p)
	return job
}
