package weir_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/files"
)

// printPlan prints each vertex of job's graph: its name and parallelism,
// the edges into it, and its signature (the types it was built with, which
// a TaskManager checks against its own build).
func printPlan(job *weir.Job) {
	g, err := job.Graph()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range g.GetVertices() {
		var in []string
		for _, e := range v.GetInputs() {
			in = append(in, fmt.Sprintf("%s %s", e.GetSource(), strings.ToLower(strings.TrimPrefix(e.GetPartitioner().String(), "PARTITIONER_"))))
		}
		from := ""
		if len(in) > 0 {
			from = " ← " + strings.Join(in, ", ")
		}
		fmt.Printf("%s ×%d%s: %s\n", v.GetName(), v.GetParallelism(), from, v.GetConfig().GetFields()["weir.signature"].GetStringValue())
	}
}

// Map turns each record into one other record; the vertex runs chained to
// its input (a forward edge).
func ExampleMap() {
	job := weir.NewJob("lengths")
	words := weir.FromSource(job, "words", weir.Generate(3, func(i int64) string { return strings.Repeat("a", int(i)) }))
	lengths := weir.Map(words, "lengths", func(w string) int { return len(w) })
	weir.SinkTo(lengths, "sink", weir.Discard[int]())
	printPlan(job)
	// Output:
	// words ×1: generate() string
	// lengths ×1 ← words forward: map(string) int
	// sink ×1 ← lengths forward: discard
}

// KeyBy partitions a stream by key (a hash edge), so that everything of
// one key reaches the same subtask and its state; Reduce keeps a running
// value per key.
func ExampleKeyBy() {
	job := weir.NewJob("totals")
	amounts := weir.FromSource(job, "amounts", weir.Generate(100, func(i int64) int64 { return i }), weir.Parallelism(2))
	byParity := weir.KeyBy(amounts, func(v int64) bool { return v%2 == 0 })
	totals := weir.Reduce(byParity, "totals", func(acc, v int64) int64 { return acc + v }, weir.Parallelism(4))
	weir.SinkTo(totals, "sink", weir.Discard[int64](), weir.Parallelism(4))
	printPlan(job)
	// Output:
	// amounts ×2: generate() int64
	// totals ×4 ← amounts hash: reduce(int64) by bool
	// sink ×4 ← totals forward: discard
}

// Window groups a keyed stream into event-time windows; Aggregate folds
// each window into one result per key, emitted when the watermark passes
// the window's end.
func ExampleWindow() {
	type click struct {
		Page string
		TS   int64
	}
	job := weir.NewJob("page-views")
	clicks := weir.FromSource(job, "clicks", weir.Generate(0, func(i int64) click {
		return click{Page: fmt.Sprintf("/p/%d", i%10), TS: i}
	}, weir.EventTime(time.Millisecond, 0)), weir.Watermarks(100*time.Millisecond, 0))
	windows := weir.Window(weir.KeyBy(clicks, func(c click) string { return c.Page }), weir.Tumbling(time.Minute))
	views := weir.Aggregate(windows, "views", weir.AggregateFuncs[click, int64, int64]{
		CreateFn: func() int64 { return 0 },
		AddFn:    func(n int64, _ click) int64 { return n + 1 },
		MergeFn:  func(a, b int64) int64 { return a + b },
		ResultFn: func(n int64) int64 { return n },
	})
	weir.SinkTo(views, "sink", weir.Discard[weir.Windowed[string, int64]]())
	printPlan(job)
	// Output:
	// clicks ×1: generate() weir_test.click
	// views ×1 ← clicks hash: aggregate(weir_test.click by string, int64) int64
	// sink ×1 ← views forward: discard
}

// alerter remembers each user's last event and fires when a user was
// silent for a minute of event time.
type alerter struct {
	last *weir.ValueState[weir.Time]
}

func (a *alerter) ProcessElement(ctx *weir.Context[string, string], _ int64) error {
	if prev, ok := a.last.Value(ctx); ok {
		ctx.DeleteEventTimeTimer(prev.Add(time.Minute))
	}
	a.last.Update(ctx, ctx.Timestamp())
	ctx.RegisterEventTimeTimer(ctx.Timestamp().Add(time.Minute))
	return nil
}

func (a *alerter) OnTimer(ctx *weir.Context[string, string], _ weir.Timer) error {
	ctx.Emit(ctx.Key() + " went quiet")
	a.last.Clear(ctx)
	return nil
}

// Process runs a function per record of a keyed stream with keyed state
// and timers, as Flink's KeyedProcessFunction; the factory makes one per
// subtask.
func ExampleProcess() {
	job := weir.NewJob("inactivity")
	events := weir.FromSource(job, "events", weir.Generate(0, func(i int64) int64 { return i * 1000 },
		weir.EventTime(time.Second, 0)), weir.Watermarks(time.Second, 0))
	keyed := weir.KeyBy(events, func(ts int64) string { return fmt.Sprintf("user-%d", ts%7) })
	alerts := weir.Process(keyed, "alerts", func() weir.KeyedProcessFunction[string, int64, string] {
		return &alerter{last: weir.NewValueState[weir.Time]("last-seen")}
	})
	weir.SinkTo(alerts, "sink", weir.Discard[string]())
	printPlan(job)
	// Output:
	// events ×1: generate() int64
	// alerts ×1 ← events hash: process(int64 by string) string
	// sink ×1 ← alerts forward: discard
}

// A typed source and sink: Generate splits a sequence across its subtasks
// and checkpoints each one's position; files.Sink writes one line per record
// with a two-phase commit, visible once the checkpoint after it completed.
func ExampleSinkTo() {
	job := weir.NewJob("squares", weir.Checkpointing(time.Second))
	n := weir.FromSource(job, "n", weir.Generate(1000, func(i int64) int64 { return i }), weir.Parallelism(2))
	squares := weir.Map(n, "squares", func(i int64) int64 { return i * i }, weir.Parallelism(2))
	weir.SinkTo(squares, "files", files.Sink("/tmp/squares", func(v int64) string { return fmt.Sprint(v) }), weir.Parallelism(2))
	printPlan(job)
	// Output:
	// n ×2: generate() int64
	// squares ×2 ← n forward: map(int64) int64
	// files ×2 ← squares forward: file-sink(int64)
}

// Job options set what the whole job shares: checkpointing, state,
// restarts; mistakes made while building are collected and reported
// together by Graph (and by the program's plan and submit).
func ExampleNewJob() {
	job := weir.NewJob("bad", weir.Checkpointing(10*time.Second), weir.PebbleState(true))
	src := weir.FromSource(job, "src", weir.Generate(1, func(i int64) int64 { return i }))
	weir.Map(src, "double", func(i int64) int64 { return 2 * i })
	weir.Map(src, "double", func(i int64) int64 { return 2 * i })
	printPlan(job)
	// Output:
	// weir: job "bad": vertex name "double" is used twice: names identify vertices, and their state in savepoints
}
