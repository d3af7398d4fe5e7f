package weir_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/files"
	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/poll"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// goldenTotal is how many events the golden job reads; its savepoint is
// taken part way.
const goldenTotal = 4000

// goldenStats is the struct a golden job keeps per key: its layout is
// recorded in the savepoint's schema.
type goldenStats struct {
	Count int64
	Sum   int64
	Last  string
}

// goldenJob holds every kind of Go API state: a struct value, a map, a
// list, event-time timers and a rolling Reduce, and a file sink's pending
// parts.
func goldenJob(out string, opts ...weir.JobOption) *weir.Job {
	job := weir.NewJob("golden", append([]weir.JobOption{weir.Checkpointing(50 * time.Millisecond)}, opts...)...)
	evs := weir.FromSource(job, "events", weir.Generate(goldenTotal, func(i int64) int64 { return i }, weir.Rate(4000), weir.EventTime(time.Millisecond, 0)),
		weir.Watermarks(0, 0))
	keyed := weir.KeyBy(evs, func(i int64) int64 { return i % 5 })
	stats := weir.Process(keyed, "stats", func() weir.KeyedProcessFunction[int64, int64, string] {
		return &goldenFn{
			stats:  weir.NewValueState[goldenStats]("stats"),
			byMod:  weir.NewMapState[int64, int64]("by-mod"),
			recent: weir.NewListState[int64]("recent"),
		}
	})
	sums := weir.Reduce(keyed, "running-sum", func(a, b int64) int64 { return a + b })
	weir.SinkTo(weir.Union(stats, weir.Map(sums, "format", func(s int64) string { return fmt.Sprint("sum ", s) })), "sink",
		files.Sink(out, func(s string) string { return s }))
	return job
}

type goldenFn struct {
	stats  *weir.ValueState[goldenStats]
	byMod  *weir.MapState[int64, int64]
	recent *weir.ListState[int64]
}

func (f *goldenFn) ProcessElement(ctx *weir.Context[int64, string], i int64) error {
	s, _ := f.stats.Value(ctx)
	s.Count++
	s.Sum += i
	s.Last = fmt.Sprint("e", i)
	f.stats.Update(ctx, s)
	n, _ := f.byMod.Get(ctx, i%3)
	f.byMod.Put(ctx, i%3, n+1)
	recent := append(f.recent.Get(ctx), i)
	if len(recent) > 3 {
		recent = recent[1:]
	}
	f.recent.Update(ctx, recent)
	// One timer per key and 100 ms of event time.
	ctx.RegisterEventTimeTimer(weir.Time((i/100 + 1) * 100))
	ctx.Emit(fmt.Sprintf("key %d count %d sum %d last %s mod %d recent %v", ctx.Key(), s.Count, s.Sum, s.Last, n+1, recent))
	return nil
}

func (f *goldenFn) OnTimer(ctx *weir.Context[int64, string], t weir.Timer) error {
	ctx.Emit(fmt.Sprintf("timer key %d at %d", ctx.Key(), t.Timestamp))
	return nil
}

// TestGoldenJobSavepoint restores the savepoint of a Go API job committed
// in testdata/golden/go-job (taken part way through its input, with the
// file sink's directory as it was then) into this release's program, on
// the heap and on Pebble: the job must finish with the same committed
// output, every line once. WEIR_GOLDEN_WRITE=1 takes a new savepoint and
// writes its expected output; a later release keeps the files and must
// pass as they are.
func TestGoldenJobSavepoint(t *testing.T) {
	golden := filepath.Join("testdata", "golden", "go-job")
	if os.Getenv("WEIR_GOLDEN_WRITE") != "" {
		writeGoldenJob(t, golden)
	}
	want, err := os.ReadFile(filepath.Join(golden, "output.txt"))
	if err != nil {
		t.Fatalf("%v (WEIR_GOLDEN_WRITE=1 writes the golden savepoint)", err)
	}
	for _, pebble := range []bool{false, true} {
		t.Run(fmt.Sprintf("pebble=%v", pebble), func(t *testing.T) {
			var opts []weir.JobOption
			if pebble {
				opts = append(opts, weir.PebbleState(true))
			}
			got := restoreGoldenJob(t, golden, opts...)
			if got != string(want) {
				t.Fatalf("restored from %s, the job commits\n%s\nwant (output.txt)\n%s", golden, got, want)
			}
		})
	}
}

// restoreGoldenJob runs the golden job from the savepoint in golden, its
// sink directory a copy of golden/out, and returns every committed line,
// sorted.
func restoreGoldenJob(t *testing.T, golden string, opts ...weir.JobOption) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if err := os.CopyFS(out, os.DirFS(filepath.Join(golden, "out"))); err != nil {
		t.Fatal(err)
	}
	job := goldenJob(out, opts...)
	c := startCluster(t, job)
	// A savepoint's handles name its directory: it keeps its name.
	sps, err := filepath.Glob(filepath.Join(golden, "savepoint-*"))
	if err != nil || len(sps) != 1 {
		t.Fatalf("%s holds savepoints %v: want one", golden, sps)
	}
	id := c.submit(job, "--from", c.adopt(filepath.Join(sps[0], "_metadata")))
	if info := c.wait(id, weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_RESTARTING); info.GetState() != weirv1.JobState_JOB_STATE_FINISHED {
		t.Fatalf("the restored job ended %s: %s", info.GetState(), info.GetFailureCause())
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	if dup := len(lines) - len(slices.Compact(slices.Clone(lines))); dup > 0 {
		t.Fatalf("%d lines committed twice", dup)
	}
	return strings.Join(lines, "\n") + "\n"
}

// writeGoldenJob runs the golden job until part of its output is
// committed, stops it with a savepoint, and keeps the savepoint and the
// sink's directory in golden; then restores them once to write the
// expected output.
func writeGoldenJob(t *testing.T, golden string) {
	t.Helper()
	if err := os.RemoveAll(golden); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	job := goldenJob(out)
	c := startCluster(t, job)
	id := c.submit(job)
	c.wait(id, weirv1.JobState_JOB_STATE_RUNNING)
	poll.Until(t, time.Minute, 20*time.Millisecond, "some committed output", func() (bool, string) {
		lines, _ := check.ReadCommitted(out)
		return len(lines) > goldenTotal/2, fmt.Sprint(len(lines), " lines")
	})
	sp := c.stopWithSavepoint(id)
	c.wait(id)
	dir := strings.TrimSuffix(sp.GetExternalPath(), "/_metadata")
	if err := os.CopyFS(filepath.Join(golden, filepath.Base(dir)), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(golden, "out"), os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	got := restoreGoldenJob(t, golden)
	if err := os.WriteFile(filepath.Join(golden, "output.txt"), []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
}
