package weir_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/files"
	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/testcluster"
	"github.com/weirproject/weir/program"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

// cluster is an in-process cluster: a JobManager and two TaskManagers
// whose operators are a program's own, as `prog taskmanager` has them.
type cluster struct {
	t      *testing.T
	addr   string
	client weirv1grpc.ClientServiceClient
	// ckpt is the JobManager's checkpoint directory: savepoints are
	// taken into it and restored from it only.
	ckpt string
}

// adopt copies the savepoint at sp, taken on another cluster, into c's
// checkpoint directory, as an operator moves one between clusters, and
// returns its new location.
func (c *cluster) adopt(sp string) string {
	c.t.Helper()
	dir := strings.TrimSuffix(sp, "/_metadata")
	to := filepath.Join(c.ckpt, "savepoints", filepath.Base(dir))
	if err := os.CopyFS(to, os.DirFS(dir)); err != nil {
		c.t.Fatal(err)
	}
	return to
}

func startCluster(t *testing.T, worker *weir.Job) *cluster {
	t.Helper()
	tc := testcluster.Start(t, testcluster.Options{})
	for i := range 2 {
		tc.StartTaskManager(fmt.Sprintf("tm-%d", i), 2, worker.Registry())
	}
	return &cluster{t: t, addr: tc.RPCAddr, client: tc.Client, ckpt: filepath.Join(tc.Dir, "checkpoints")}
}

// submit submits j the way `prog submit` does, with args added.
func (c *cluster) submit(j *weir.Job, args ...string) string {
	c.t.Helper()
	var out, errOut bytes.Buffer
	if code := program.Run(j, append([]string{"submit", "--jobmanager", c.addr}, args...), &out, &errOut); code != 0 {
		c.t.Fatalf("submit: exit %d: %s", code, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// stopWithSavepoint stops job id with a savepoint, asking again while its
// tasks are still starting.
func (c *cluster) stopWithSavepoint(id string) *weirv1.StopWithSavepointResponse {
	c.t.Helper()
	var sp *weirv1.StopWithSavepointResponse
	poll.Until(c.t, time.Minute, 50*time.Millisecond, "a stop with savepoint", func() (bool, string) {
		var err error
		sp, err = c.client.StopWithSavepoint(context.Background(), &weirv1.StopWithSavepointRequest{JobId: id})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return sp
}

// runningCounts parses lines "<key>,<count>" into each key's counts.
func runningCounts(t *testing.T, lines []string) map[string][]int64 {
	t.Helper()
	got := map[string][]int64{}
	for _, l := range lines {
		k, n, _ := strings.Cut(l, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("line %q", l)
		}
		got[k] = append(got[k], v)
	}
	return got
}

// wait waits for job id to reach one of states (an end, by default).
func (c *cluster) wait(id string, states ...weirv1.JobState) *weirv1.JobInfo {
	c.t.Helper()
	if len(states) == 0 {
		states = []weirv1.JobState{weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED}
	}
	var info *weirv1.JobInfo
	poll.Until(c.t, 2*time.Minute, 20*time.Millisecond, "job "+id, func() (bool, string) {
		resp, err := c.client.GetJob(context.Background(), &weirv1.GetJobRequest{JobId: id})
		if err != nil {
			return false, err.Error()
		}
		info = resp.GetJob()
		return slices.Contains(states, info.GetState()), info.GetState().String()
	})
	return info
}

// runJob runs j on a cluster of its own to the end, which must be
// FINISHED.
func runJob(t *testing.T, j *weir.Job) *weirv1.JobInfo {
	t.Helper()
	c := startCluster(t, j)
	info := c.wait(c.submit(j))
	if info.GetState() != weirv1.JobState_JOB_STATE_FINISHED {
		t.Fatalf("job ended %s: %s", info.GetState(), info.GetFailureCause())
	}
	return info
}

var words = []string{"stream", "weir", "flink", "barrier", "checkpoint", "window", "state", "key"}

func sentence(i int64) string {
	return fmt.Sprintf("%s %s %s", words[i%8], words[(i/8)%8], words[(i*3)%8])
}

type wordCount struct {
	Word  string
	Count int64
}

// Word count over a generated text, every running count committed once.
func TestWordCount(t *testing.T) {
	const n = 3000
	out := filepath.Join(t.TempDir(), "out")
	job := weir.NewJob("word-count", weir.Checkpointing(100*time.Millisecond))
	lines := weir.FromSource(job, "lines", weir.Generate(n, sentence, weir.Rate(20000)), weir.Parallelism(2))
	ws := weir.FlatMap(lines, "words", func(l string, emit func(wordCount)) {
		for _, w := range strings.Fields(l) {
			emit(wordCount{Word: w, Count: 1})
		}
	}, weir.Parallelism(2))
	counts := weir.Reduce(weir.KeyBy(ws, func(w wordCount) string { return w.Word }), "counts",
		func(a, b wordCount) wordCount { return wordCount{Word: a.Word, Count: a.Count + b.Count} }, weir.Parallelism(2))
	weir.SinkTo(counts, "sink", files.Sink(out, func(w wordCount) string { return fmt.Sprintf("%s,%d", w.Word, w.Count) }), weir.Parallelism(2))
	runJob(t, job)

	lines2, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	// The same computation in plain Go: every word's running counts.
	want := map[string]int64{}
	for i := range int64(n) {
		for _, w := range strings.Fields(sentence(i)) {
			want[w]++
		}
	}
	got := runningCounts(t, lines2)
	for w, total := range want {
		cs := got[w]
		slices.Sort(cs)
		if int64(len(cs)) != total || cs[0] != 1 || cs[len(cs)-1] != total {
			t.Fatalf("word %q: %d running counts from %v to %v, want 1..%d once each", w, len(cs), cs[0], cs[len(cs)-1], total)
		}
		for i, c := range cs {
			if c != int64(i+1) {
				t.Fatalf("word %q: running count %d missing or repeated", w, i+1)
			}
		}
	}
}

type event struct {
	User   string
	Time   int64
	Amount int64
}

func events(i int64) event {
	return event{User: fmt.Sprintf("u%d", i%5), Time: i * 3, Amount: i % 7}
}

// A windowed aggregation (sum and count per user and tumbling window) and
// a window reduce, compared with the same computation in plain Go.
func TestWindowAggregate(t *testing.T) {
	const n = 4000
	dir := t.TempDir()
	job := weir.NewJob("windows", weir.Checkpointing(100*time.Millisecond))
	evs := weir.FromSource(job, "events", weir.Generate(n, events, weir.Rate(20000), weir.EventTime(3*time.Millisecond, 0)),
		weir.Parallelism(2), weir.Watermarks(10*time.Millisecond, 0))
	// Timestamps come from the generator (i*3 ms), the same as Time.
	byUser := weir.KeyBy(evs, func(e event) string { return e.User })
	type acc struct{ Sum, N int64 }
	sums := weir.Aggregate(weir.Window(byUser, weir.Tumbling(100*time.Millisecond)), "sums", weir.AggregateFuncs[event, acc, acc]{
		CreateFn: func() acc { return acc{} },
		AddFn:    func(a acc, e event) acc { return acc{a.Sum + e.Amount, a.N + 1} },
		MergeFn:  func(a, b acc) acc { return acc{a.Sum + b.Sum, a.N + b.N} },
		ResultFn: func(a acc) acc { return a },
	}, weir.Parallelism(2))
	weir.SinkTo(sums, "sums-sink", files.Sink(filepath.Join(dir, "sums"), func(w weir.Windowed[string, acc]) string {
		return fmt.Sprintf("%s,%d,%d,%d,%d", w.Key, w.Start, w.End, w.Value.Sum, w.Value.N)
	}))
	maxes := weir.ReduceWindow(weir.Window(byUser, weir.Sliding(200*time.Millisecond, 100*time.Millisecond)), "maxes",
		func(a, b event) event {
			if b.Amount > a.Amount {
				return b
			}
			return a
		})
	weir.SinkTo(maxes, "maxes-sink", files.Sink(filepath.Join(dir, "maxes"), func(w weir.Windowed[string, event]) string {
		return fmt.Sprintf("%s,%d,%d,%d", w.Key, w.Start, w.End, w.Value.Amount)
	}))
	runJob(t, job)

	wantSums, wantMax := map[string]string{}, map[string]int64{}
	type agg struct{ sum, n int64 }
	sumAcc := map[string]*agg{}
	for i := range int64(n) {
		e := events(i)
		start := e.Time / 100 * 100
		id := fmt.Sprintf("%s,%d,%d", e.User, start, start+100)
		if sumAcc[id] == nil {
			sumAcc[id] = &agg{}
		}
		sumAcc[id].sum += e.Amount
		sumAcc[id].n++
		for s := e.Time / 100 * 100; s > e.Time-200; s -= 100 {
			id := fmt.Sprintf("%s,%d,%d", e.User, s, s+200)
			if m, ok := wantMax[id]; !ok || e.Amount > m {
				wantMax[id] = e.Amount
			}
		}
	}
	for id, a := range sumAcc {
		wantSums[id] = fmt.Sprintf("%d,%d", a.sum, a.n)
	}
	check2 := func(name string, want map[string]string) {
		lines, err := check.ReadCommitted(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, l := range lines {
			parts := strings.SplitN(l, ",", 4)
			id := strings.Join(parts[:3], ",")
			if _, dup := got[id]; dup {
				t.Fatalf("%s: window %s twice", name, id)
			}
			got[id] = parts[3]
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d windows, want %d", name, len(got), len(want))
		}
		for id, w := range want {
			if got[id] != w {
				t.Fatalf("%s: window %s = %q, want %q", name, id, got[id], w)
			}
		}
	}
	check2("sums", wantSums)
	wm := map[string]string{}
	for id, m := range wantMax {
		wm[id] = strconv.FormatInt(m, 10)
	}
	check2("maxes", wm)
}

// alert is what the inactivity function emits.
type alert struct {
	User       string
	LastSeen   int64
	SilentFrom int64
}

// inactivity alerts when a user has no event for 50 ms of event time: a
// keyed process function with state and event-time timers, exact however
// the events arrive. An event waits in pending, with a timer at its time,
// until the watermark passes it: timers fire in timestamp order, so the
// events are seen in order; each moves the user's silence timer to
// last+50, which, if it fires, finds the user silent since last.
type inactivity struct {
	pending *weir.MapState[weir.Time, bool]
	last    *weir.ValueState[weir.Time]
}

func (f *inactivity) ProcessElement(ctx *weir.Context[string, alert], e event) error {
	f.pending.Put(ctx, weir.Time(e.Time), true)
	ctx.RegisterEventTimeTimer(weir.Time(e.Time))
	return nil
}

func (f *inactivity) OnTimer(ctx *weir.Context[string, alert], t weir.Timer) error {
	last, seen := f.last.Value(ctx)
	if _, isEvent := f.pending.Get(ctx, t.Timestamp); isEvent {
		f.pending.Remove(ctx, t.Timestamp)
		// The silence timer at last+50 stays: it is ignored when it fires
		// after a later event. Deleting it could delete an event's timer
		// of the same timestamp (timers of a key are one per timestamp).
		f.last.Update(ctx, t.Timestamp)
		ctx.RegisterEventTimeTimer(t.Timestamp.Add(50 * time.Millisecond))
		return nil
	}
	if seen && last.Add(50*time.Millisecond) == t.Timestamp {
		ctx.Emit(alert{User: ctx.Key(), LastSeen: int64(last), SilentFrom: int64(t.Timestamp)})
	}
	return nil
}

func TestProcessFunctionTimers(t *testing.T) {
	const n = 3000
	// User u<k> sends an event every 5th record, but some users skip a
	// stretch, and every user stops at the end: alerts in between and at
	// the end of the input (the watermark reaches its end).
	gen := func(i int64) event {
		u := i % 5
		if u == 2 && i%1000 > 800 {
			u = 3
		}
		return event{User: fmt.Sprintf("u%d", u), Time: i}
	}
	out := filepath.Join(t.TempDir(), "alerts")
	job := weir.NewJob("inactivity", weir.Checkpointing(100*time.Millisecond))
	evs := weir.FromSource(job, "events", weir.Generate(n, gen, weir.Rate(20000), weir.EventTime(time.Millisecond, 0)),
		weir.Parallelism(2), weir.Watermarks(5*time.Millisecond, 0))
	alerts := weir.Process(weir.KeyBy(evs, func(e event) string { return e.User }), "inactivity",
		func() weir.KeyedProcessFunction[string, event, alert] {
			return &inactivity{pending: weir.NewMapState[weir.Time, bool]("pending"), last: weir.NewValueState[weir.Time]("last")}
		}, weir.Parallelism(2))
	weir.SinkTo(alerts, "sink", files.Sink(out, func(a alert) string { return fmt.Sprintf("%s,%d,%d", a.User, a.LastSeen, a.SilentFrom) }))
	runJob(t, job)

	var want []string
	last := map[string]int64{}
	for i := range int64(n) {
		e := gen(i)
		if l, ok := last[e.User]; ok && e.Time > l+50 {
			want = append(want, fmt.Sprintf("%s,%d,%d", e.User, l, l+50))
		}
		last[e.User] = e.Time
	}
	for u, l := range last {
		want = append(want, fmt.Sprintf("%s,%d,%d", u, l, l+50))
	}
	got, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("alerts\n%v\nwant\n%v", got, want)
	}
	t.Logf("%d alerts", len(got))
}

// counter is a process function counting records per key in a state
// whose type the tests change.
func counterJob[V any](dir string, count int64, rate float64, add func(V) V) *weir.Job {
	job := weir.NewJob("counter", weir.Checkpointing(50*time.Millisecond))
	src := weir.FromSource(job, "numbers", weir.Generate(count, func(i int64) int64 { return i }, weir.Rate(rate)))
	counted := weir.Process(weir.KeyBy(src, func(i int64) int64 { return i % 4 }), "count",
		func() weir.KeyedProcessFunction[int64, int64, string] {
			return &counter[V]{n: weir.NewValueState[V]("n"), add: add}
		})
	if extraVertex {
		counted = weir.Map(counted, "upper", strings.ToUpper)
	}
	weir.SinkTo(counted, "sink", files.Sink(dir, func(s string) string { return s }))
	return job
}

// extraVertex makes counterJob's program a changed one: a vertex more.
var extraVertex bool

type counter[V any] struct {
	n   *weir.ValueState[V]
	add func(V) V
}

func (c *counter[V]) ProcessElement(ctx *weir.Context[int64, string], v int64) error {
	n, _ := c.n.Value(ctx)
	n = c.add(n)
	c.n.Update(ctx, n)
	ctx.Emit(fmt.Sprintf("%d,%v", ctx.Key(), n))
	return nil
}

// A savepoint restores into the same program rebuilt, and is refused by
// a program whose state of the same name changed type, with an error
// naming the vertex and the state.
func TestSavepointStateTypes(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	first := counterJob(out, 0, 2000, func(n int64) int64 { return n + 1 })
	c := startCluster(t, first)
	id := c.submit(first)
	c.wait(id, weirv1.JobState_JOB_STATE_RUNNING)
	sp := c.stopWithSavepoint(id)
	c.wait(id)

	// The same program, rebuilt: the counts go on.
	again := c.submit(counterJob(out, 0, 2000, func(n int64) int64 { return n + 1 }), "--from", sp.GetExternalPath())
	c.wait(again, weirv1.JobState_JOB_STATE_RUNNING)
	if _, err := c.client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: again}); err != nil {
		t.Fatal(err)
	}
	c.wait(again)

	// A changed program that keeps the vertex and state names and types
	// restores too.
	extraVertex = true
	changedOK := counterJob(out, 0, 2000, func(n int64) int64 { return n + 1 })
	extraVertex = false
	c3 := startCluster(t, changedOK)
	resumed := c3.submit(changedOK, "--from", c3.adopt(sp.GetExternalPath()))
	c3.wait(resumed, weirv1.JobState_JOB_STATE_RUNNING)
	poll.Until(t, time.Minute, 20*time.Millisecond, "a checkpoint of the changed program", func() (bool, string) {
		r, err := c3.client.TriggerCheckpoint(context.Background(), &weirv1.TriggerCheckpointRequest{JobId: resumed})
		if err != nil {
			return false, err.Error()
		}
		return r.GetCheckpointId() > 0, ""
	})
	if info := c3.wait(resumed, weirv1.JobState_JOB_STATE_RUNNING); info.GetRestarts() != 0 {
		t.Fatalf("the changed program restarted: %s", info.GetFailureCause())
	}
	if _, err := c3.client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: resumed}); err != nil {
		t.Fatal(err)
	}
	c3.wait(resumed)

	// The state "n" is a string now: refused, before any is misread.
	changed := counterJob(out, 0, 2000, func(n string) string { return n + "+" })
	c2 := startCluster(t, changed)
	bad := c2.submit(changed, "--from", c2.adopt(sp.GetExternalPath()))
	info := c2.wait(bad, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_RESTARTING)
	for _, want := range []string{`vertex "count"`, `state "n" cannot be restored: the value: int64 in the checkpoint or savepoint restored, string in this program`} {
		if !strings.Contains(info.GetFailureCause(), want) {
			t.Fatalf("failure %q lacks %q", info.GetFailureCause(), want)
		}
	}
	t.Logf("refused: %s", info.GetFailureCause())
}

// A TaskManager built from another version of the program refuses a
// vertex whose function or types changed, and one it lacks, clearly.
func TestWorkerFromAnotherBuild(t *testing.T) {
	dir := t.TempDir()
	submitted := counterJob(filepath.Join(dir, "out"), 100, 0, func(n int64) int64 { return n + 1 })
	for _, tc := range []struct {
		name   string
		worker *weir.Job
		want   string
	}{
		{"changed types", func() *weir.Job {
			// The same vertices, keyed by a string now.
			j := weir.NewJob("counter")
			src := weir.FromSource(j, "numbers", weir.Generate(100, func(i int64) int64 { return i }))
			counted := weir.Process(weir.KeyBy(src, func(i int64) string { return fmt.Sprint(i % 4) }), "count",
				func() weir.KeyedProcessFunction[string, int64, string] { return nil })
			weir.SinkTo(counted, "sink", files.Sink(dir, func(s string) string { return s }))
			return j
		}(), `vertex "count": the job was submitted by a program whose vertex is process(int64 by int64) string, but this TaskManager's program has process(int64 by string) string`},
		{"no such vertex", func() *weir.Job {
			j := weir.NewJob("other")
			weir.SinkTo(weir.FromSource(j, "numbers", weir.Generate(1, func(i int64) int64 { return i })), "sink", weir.Discard[int64]())
			return j
		}(), `this TaskManager has no operator "go:count"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, tc.worker)
			info := c.wait(c.submit(submitted, "--timeout", "10s"), weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_RESTARTING)
			if !strings.Contains(info.GetFailureCause(), tc.want) {
				t.Fatalf("failure %q lacks %q", info.GetFailureCause(), tc.want)
			}
			t.Logf("refused: %s", info.GetFailureCause())
		})
	}
}

func TestPlanAndBuildErrors(t *testing.T) {
	job := weir.NewJob("plan", weir.Checkpointing(time.Second), weir.PebbleState(true))
	src := weir.FromSource(job, "src", weir.Generate(10, func(i int64) int64 { return i }, weir.EventTime(time.Millisecond, 0)),
		weir.Parallelism(2), weir.Watermarks(200*time.Millisecond, 5*time.Second))
	evens := weir.Filter(src, "evens", func(i int64) bool { return i%2 == 0 }, weir.Parallelism(2))
	sums := weir.Reduce(weir.KeyBy(evens, func(i int64) int64 { return i % 3 }), "sums", func(a, b int64) int64 { return a + b })
	weir.SinkTo(sums, "sink", weir.Discard[int64]())
	var out, errOut bytes.Buffer
	if code := program.Run(job, []string{"plan"}, &out, &errOut); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"name: plan",
		"operator: go:src",
		"watermarks: {max-out-of-orderness: 200ms, idle-timeout: 5s, interval: 200ms}",
		"inputs: [{from: evens, partition: hash}]",
		"weir.signature: reduce(int64) by int64",
		"backend: pebble",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}

	bad := weir.NewJob("bad")
	a := weir.FromSource(bad, "a", weir.Generate(1, func(i int64) int64 { return i }))
	weir.Map(a, "a", func(i int64) int64 { return i })
	weir.Map(a, "no spaces", func(i int64) int64 { return i })
	weir.Map(a, "ptr", func(i int64) *int { return nil })
	if _, err := bad.Graph(); err == nil ||
		!strings.Contains(err.Error(), `vertex name "a" is used twice`) ||
		!strings.Contains(err.Error(), `vertex name "no spaces"`) ||
		!strings.Contains(err.Error(), "Map ptr: weir: no codec for *int") {
		t.Fatalf("Graph() = %v, want the three mistakes", err)
	}
	if code := program.Run(bad, []string{"plan"}, &out, &errOut); code != 1 {
		t.Fatalf("plan of a bad job: exit %d", code)
	}
	if code := program.Run(bad, []string{"launch"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
}

// Keying one stream two ways goes through a pass-through vertex.
func TestKeyByTwice(t *testing.T) {
	dir := t.TempDir()
	job := weir.NewJob("twice", weir.Checkpointing(100*time.Millisecond))
	src := weir.FromSource(job, "src", weir.Generate(1000, func(i int64) int64 { return i }), weir.Parallelism(2))
	byMod := weir.Reduce(weir.KeyBy(src, func(i int64) int64 { return i % 3 }), "mod3", func(a, b int64) int64 { return a + b }, weir.Parallelism(2))
	byTen := weir.Reduce(weir.KeyBy(src, func(i int64) bool { return i < 500 }), "half", func(a, b int64) int64 { return a + b }, weir.Parallelism(2))
	weir.SinkTo(weir.Union(byMod, byTen), "sink", files.Sink(dir, func(i int64) string { return strconv.FormatInt(i, 10) }))
	g, err := job.Graph()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range g.GetVertices() {
		names = append(names, v.GetName())
	}
	if !slices.Contains(names, "src.keyBy-1") {
		t.Fatalf("vertices %v: want the pass-through src.keyBy-1", names)
	}
	runJob(t, job)
	lines, err := check.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The final sums of both reduces are among the running sums.
	var total, half int64
	for i := range int64(1000) {
		total += i
		if i < 500 {
			half += i
		}
	}
	if len(lines) != 2000 || !slices.Contains(lines, strconv.FormatInt(half, 10)) || !slices.Contains(lines, strconv.FormatInt(total-half, 10)) {
		t.Fatalf("%d lines (want 2000), sums %d and %d among them?", len(lines), half, total-half)
	}
}

type order struct {
	ID   int64
	Item string
}

type payment struct {
	Order int64
	Cents int64
}

// Two keyed streams joined by interval and by window, compared with the
// pairs a nested loop finds.
func TestJoins(t *testing.T) {
	const n = 1500
	dir := t.TempDir()
	job := weir.NewJob("joins", weir.Checkpointing(100*time.Millisecond))
	orders := weir.FromSource(job, "orders", weir.Generate(n, func(i int64) order { return order{ID: i % 300, Item: fmt.Sprintf("item-%d", i)} },
		weir.Rate(20000), weir.EventTime(2*time.Millisecond, 0)), weir.Parallelism(2), weir.Watermarks(5*time.Millisecond, 0))
	payments := weir.FromSource(job, "payments", weir.Generate(n, func(i int64) payment { return payment{Order: (i * 7) % 300, Cents: i} },
		weir.Rate(20000), weir.EventTime(2*time.Millisecond, 0)), weir.Parallelism(2), weir.Watermarks(5*time.Millisecond, 0))
	byOrder := weir.KeyBy(orders, func(o order) int64 { return o.ID })
	byPaid := weir.KeyBy(payments, func(p payment) int64 { return p.Order })
	pair := func(k int64, o order, p payment) string { return fmt.Sprintf("%d,%s,%d", k, o.Item, p.Cents) }
	near := weir.IntervalJoin(byOrder, byPaid, "near", -100*time.Millisecond, 300*time.Millisecond, pair, weir.Parallelism(2))
	same := weir.WindowJoin(byOrder, byPaid, "same-second", time.Second, pair, weir.Parallelism(2))
	id := func(s string) string { return s }
	weir.SinkTo(near, "near-sink", files.Sink(filepath.Join(dir, "near"), id))
	weir.SinkTo(same, "same-sink", files.Sink(filepath.Join(dir, "same"), id))
	runJob(t, job)

	var wantNear, wantSame []string
	for i := range int64(n) {
		o, ots := order{ID: i % 300, Item: fmt.Sprintf("item-%d", i)}, i*2
		for k := range int64(n) {
			p, pts := payment{Order: (k * 7) % 300, Cents: k}, k*2
			if p.Order != o.ID {
				continue
			}
			if ots-100 <= pts && pts <= ots+300 {
				wantNear = append(wantNear, pair(o.ID, o, p))
			}
			if ots/1000 == pts/1000 {
				wantSame = append(wantSame, pair(o.ID, o, p))
			}
		}
	}
	for name, want := range map[string][]string{"near": wantNear, "same": wantSame} {
		got, err := check.ReadCommitted(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %d pairs, want %d", name, len(got), len(want))
		}
		t.Logf("%s: %d pairs", name, len(got))
	}
}

// Records later than the watermark allows reach LateData; the windows and
// the late records together hold every record once.
func TestLateData(t *testing.T) {
	const n = 600
	dir := t.TempDir()
	job := weir.NewJob("late", weir.Checkpointing(100*time.Millisecond))
	// Every 50th record is stamped half a second back: late.
	ts := func(i int64) int64 {
		if i%50 == 49 {
			return i*10 - 500
		}
		return i * 10
	}
	stamp := func(i int64) weir.Time { return weir.Time(ts(i)) }
	src := weir.FromSource(job, "src", weir.Generate(n, func(i int64) int64 { return i }, weir.Rate(500), weir.Timestamps(stamp)),
		weir.Watermarks(20*time.Millisecond, 0), weir.WatermarkInterval(5*time.Millisecond))
	windows := weir.Window(weir.KeyBy(src, func(i int64) int64 { return i % 3 }), weir.Tumbling(100*time.Millisecond))
	counts := weir.Aggregate(windows, "counts", weir.AggregateFuncs[int64, int64, int64]{
		CreateFn: func() int64 { return 0 },
		AddFn:    func(n, _ int64) int64 { return n + 1 },
		MergeFn:  func(a, b int64) int64 { return a + b },
		ResultFn: func(n int64) int64 { return n },
	})
	weir.SinkTo(counts, "counts-sink", files.Sink(filepath.Join(dir, "counts"), func(w weir.Windowed[int64, int64]) string {
		return strconv.FormatInt(w.Value, 10)
	}))
	late := weir.Map(weir.LateData(windows), "late-label", func(i int64) string { return fmt.Sprintf("late %d", i) })
	weir.SinkTo(late, "late-sink", files.Sink(filepath.Join(dir, "late"), func(s string) string { return s }))
	runJob(t, job)
	counted := int64(0)
	lines, err := check.ReadCommitted(filepath.Join(dir, "counts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		c, _ := strconv.ParseInt(l, 10, 64)
		counted += c
	}
	lateLines, err := check.ReadCommitted(filepath.Join(dir, "late"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lateLines) == 0 || counted+int64(len(lateLines)) != n {
		t.Fatalf("%d in windows + %d late, want %d with some late", counted, len(lateLines), n)
	}
	for _, l := range lateLines {
		i, _ := strconv.ParseInt(strings.TrimPrefix(l, "late "), 10, 64)
		if i%50 != 49 {
			t.Fatalf("record %d late, but it was on time", i)
		}
	}
	t.Logf("%d records in windows, %d late", counted, len(lateLines))
}

// Map and list state keep per key what a process function puts in them.
type distinct struct {
	seen  *weir.MapState[int64, bool]
	order *weir.ListState[int64]
}

// ProcessElement emits a key's last digits once it saw all ten.
func (d *distinct) ProcessElement(ctx *weir.Context[int64, string], v int64) error {
	if _, ok := d.seen.Get(ctx, v%10); ok {
		return nil
	}
	d.seen.Put(ctx, v%10, true)
	d.order.Add(ctx, v%10)
	if got := d.order.Get(ctx); len(got) == 10 {
		n := 0
		d.seen.All(ctx, func(int64, bool) bool { n++; return true })
		slices.Sort(got)
		ctx.Emit(fmt.Sprintf("%d:%v:%d", ctx.Key(), got, n))
		d.seen.Clear(ctx)
		d.order.Clear(ctx)
	}
	return nil
}

func TestMapAndListState(t *testing.T) {
	dir := t.TempDir()
	job := weir.NewJob("distinct", weir.Checkpointing(50*time.Millisecond))
	src := weir.FromSource(job, "src", weir.Generate(600, func(i int64) int64 { return i }, weir.Rate(5000)))
	out := weir.Process(weir.KeyBy(src, func(i int64) int64 { return i % 3 }), "distinct",
		func() weir.KeyedProcessFunction[int64, int64, string] {
			return &distinct{seen: weir.NewMapState[int64, bool]("seen"), order: weir.NewListState[int64]("order")}
		})
	weir.SinkTo(out, "sink", files.Sink(dir, func(s string) string { return s }))
	runJob(t, job)
	lines, err := check.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Each key gets 200 values in order from the one source subtask,
	// k, k+3, k+6, ...: their last digits run through all ten every ten
	// values, so exactly twenty complete sets per key. (Two branches
	// merged would make the count depend on how they interleave.)
	perKey := map[string]int{}
	for _, l := range lines {
		k, rest, _ := strings.Cut(l, ":")
		if rest != "[0 1 2 3 4 5 6 7 8 9]:10" {
			t.Fatalf("emitted %q", l)
		}
		perKey[k]++
	}
	for _, k := range []string{"0", "1", "2"} {
		if perKey[k] != 20 {
			t.Fatalf("key %s: %d complete sets, want 20 (%v)", k, perKey[k], lines)
		}
	}
}

func TestJobOptions(t *testing.T) {
	build := func(opts ...weir.JobOption) *weirv1.JobGraph {
		j := weir.NewJob("opts", opts...)
		weir.SinkTo(weir.FromSource(j, "src", weir.Generate(1, func(i int64) int64 { return i })), "sink", weir.Discard[int64]())
		g, err := j.Graph()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := build(weir.Checkpointing(2*time.Second), weir.AtLeastOnce(), weir.RetainedCheckpoints(4), weir.MaxParallelism(256),
		weir.PebbleState(true), weir.FixedDelayRestart(3, time.Second))
	cp := g.GetCheckpointing()
	if cp.GetInterval().AsDuration() != 2*time.Second || cp.GetMode() != weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE ||
		cp.GetRetained() != 4 || g.GetMaxParallelism() != 256 || !g.GetState().GetIncremental() ||
		g.GetRestartStrategy().GetKind() != weirv1.RestartStrategy_KIND_FIXED_DELAY || g.GetRestartStrategy().GetAttempts() != 3 {
		t.Fatalf("options did not reach the graph: %v", g)
	}
	g = build(weir.Checkpointing(time.Second), weir.UnalignedCheckpoints(), weir.NoRestart())
	if !g.GetCheckpointing().GetUnaligned() || g.GetRestartStrategy().GetKind() != weirv1.RestartStrategy_KIND_NONE {
		t.Fatalf("options did not reach the graph: %v", g)
	}
	if g = build(weir.BufferTimeout(200 * time.Microsecond)); g.GetBufferTimeout().AsDuration() != 200*time.Microsecond {
		t.Fatalf("buffer timeout: %v", g.GetBufferTimeout())
	}
	if g = build(); g.GetBufferTimeout() != nil {
		t.Fatalf("buffer timeout set by default: %v", g.GetBufferTimeout())
	}
	// Defaults as a YAML spec without those keys: no checkpoints, heap,
	// no restarts.
	g = build()
	if g.GetCheckpointing().GetInterval().AsDuration() != 0 || g.GetState().GetBackend() != weirv1.StateBackendConfig_BACKEND_HEAP ||
		g.GetRestartStrategy().GetKind() != weirv1.RestartStrategy_KIND_NONE {
		t.Fatalf("defaults: %v", g)
	}
	// Unaligned checkpoints need exactly-once: refused like in a spec.
	j := weir.NewJob("bad", weir.Checkpointing(time.Second), weir.AtLeastOnce(), weir.UnalignedCheckpoints())
	weir.SinkTo(weir.FromSource(j, "src", weir.Generate(1, func(i int64) int64 { return i })), "sink", weir.Discard[int64]())
	if _, err := j.Graph(); err == nil || !strings.Contains(err.Error(), "unaligned checkpoints require mode exactly-once") {
		t.Fatalf("Graph() = %v", err)
	}
}

type tallyV1 struct {
	Count int32
	Note  string
}

// tallyV2 is tallyV1 evolved: Note removed, Count widened and moved, Step
// added with a default.
type tallyV2 struct {
	Step  int64 `weir:"default=1"`
	Count int64
}

func tallyJob[V any](dir string, pebble bool, inc func(V) V, count func(V) int64) *weir.Job {
	opts := []weir.JobOption{weir.Checkpointing(50 * time.Millisecond)}
	if pebble {
		opts = append(opts, weir.PebbleState(true))
	}
	job := weir.NewJob("tally", opts...)
	src := weir.FromSource(job, "numbers", weir.Generate(0, func(i int64) int64 { return i }, weir.Rate(2000)))
	weir.SinkTo(weir.Process(weir.KeyBy(src, func(i int64) int64 { return i % 4 }), "count",
		func() weir.KeyedProcessFunction[int64, int64, string] {
			return &tally[V]{n: weir.NewValueState[V]("n"), inc: inc, count: count}
		}), "sink", files.Sink(dir, func(s string) string { return s }))
	return job
}

type tally[V any] struct {
	n     *weir.ValueState[V]
	inc   func(V) V
	count func(V) int64
}

func (c *tally[V]) ProcessElement(ctx *weir.Context[int64, string], _ int64) error {
	v, _ := c.n.Value(ctx)
	v = c.inc(v)
	c.n.Update(ctx, v)
	ctx.Emit(fmt.Sprintf("%d,%d", ctx.Key(), c.count(v)))
	return nil
}

// A savepoint of a struct state restores into a program whose struct
// evolved (a field removed, one widened and moved, one added with a
// default), on both backends: every key's count goes on from where it
// stopped, each count committed once.
func TestSavepointSchemaEvolution(t *testing.T) {
	for _, pebble := range []bool{false, true} {
		t.Run(fmt.Sprintf("pebble=%v", pebble), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			v1 := tallyJob(out, pebble, func(v tallyV1) tallyV1 { v.Count++; v.Note = "v1"; return v }, func(v tallyV1) int64 { return int64(v.Count) })
			c := startCluster(t, v1)
			id := c.submit(v1)
			c.wait(id, weirv1.JobState_JOB_STATE_RUNNING)
			sp := c.stopWithSavepoint(id)
			c.wait(id)
			if before, err := check.ReadCommitted(out); err != nil || len(before) == 0 {
				t.Fatalf("the first program committed %d counts: %v", len(before), err)
			}

			v2 := tallyJob(out, pebble, func(v tallyV2) tallyV2 { v.Count += v.Step; return v }, func(v tallyV2) int64 { return v.Count })
			c2 := startCluster(t, v2)
			again := c2.submit(v2, "--from", c2.adopt(sp.GetExternalPath()))
			c2.wait(again, weirv1.JobState_JOB_STATE_RUNNING)
			poll.Until(t, time.Minute, 20*time.Millisecond, "two checkpoints of the evolved program", func() (bool, string) {
				r, err := c2.client.TriggerCheckpoint(context.Background(), &weirv1.TriggerCheckpointRequest{JobId: again})
				if err != nil {
					return false, err.Error()
				}
				return r.GetCheckpointId() > sp.GetCheckpointId()+1, ""
			})
			if info := c2.wait(again, weirv1.JobState_JOB_STATE_RUNNING); info.GetRestarts() != 0 {
				t.Fatalf("the evolved program restarted: %s", info.GetFailureCause())
			}
			if _, err := c2.client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: again}); err != nil {
				t.Fatal(err)
			}
			c2.wait(again)
			lines, err := check.ReadCommitted(out)
			if err != nil {
				t.Fatal(err)
			}
			// Per key, the counts 1, 2, … n without a gap or a repeat
			// across both programs.
			counts := runningCounts(t, lines)
			for k, vs := range counts {
				slices.Sort(vs)
				for i, v := range vs {
					if v != int64(i+1) {
						t.Fatalf("key %s: counts %v…: %d at position %d", k, vs[:min(len(vs), i+3)], v, i)
					}
				}
			}
			if len(counts) != 4 {
				t.Fatalf("%d keys counted", len(counts))
			}
		})
	}
}
