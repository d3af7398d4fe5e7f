package webui_test

// Browser tests of the dashboard: a real headless Chromium, driven by
// chromedp, against a real in-process cluster (a JobManager serving the
// dashboard and the REST API, two TaskManagers). Skipped when no Chromium
// is installed; .ci/run installs Debian's chromium so CI runs them.
//
// Screenshots of every page land in internal/webui/screenshots/ (ignored
// by git), or in $WEIR_WEBUI_SCREENSHOTS when set.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/testcluster"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

type cluster struct {
	t      *testing.T
	base   string // the JobManager's HTTP address: dashboard and REST API
	client weirv1grpc.ClientServiceClient
	ckpt   string // the checkpoint directory, where savepoints must go
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	tc := testcluster.Start(t, testcluster.Options{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	for i := 1; i <= 2; i++ {
		reg := sdk.NewRegistry()
		reg.RegisterOperator("slow-sink", func() sdk.Operator { return slowSink{} })
		reg.RegisterOperator("fail-first-attempt", func() sdk.Operator { return &failFirstAttempt{} })
		reg.RegisterOperator(markupOperator, func() sdk.Operator { return slowSink{} })
		tc.StartTaskManager(fmt.Sprintf("tm-%d", i), 2, reg)
	}
	return &cluster{t: t, base: "http://" + tc.HTTPAddr, client: tc.Client, ckpt: filepath.Join(tc.Dir, "checkpoints")}
}

// slowSink takes a millisecond per record, so whatever feeds it faster is
// back-pressured.
type slowSink struct{}

func (slowSink) Open(sdk.Context) error { return nil }
func (slowSink) ProcessRecord(sdk.Record, sdk.Collector) error {
	time.Sleep(time.Millisecond) // the work of a slow sink, not a wait
	return nil
}
func (slowSink) Close() error { return nil }

// markupOperator is an operator named with markup, as a TaskManager
// built with the Go API may register anything: the dashboard shows
// operator names in the job graph.
const markupOperator = `<img src=x onerror="window.__xss=4"><script>window.__xss=5</script>`

// injectedCause is the failure of failFirstAttempt: markup the dashboard
// must show as text.
const injectedCause = `injected failure: <b>bold</b> & <img src=x onerror="window.__xss=3">`

// failFirstAttempt is a sink whose subtask 0 fails on its first record in
// its first attempt; restarted, it takes every record. It gives a job one
// real failure, restarting the failed subtask's region.
type failFirstAttempt struct{ ctx sdk.Context }

func (f *failFirstAttempt) Open(ctx sdk.Context) error { f.ctx = ctx; return nil }
func (f *failFirstAttempt) ProcessRecord(sdk.Record, sdk.Collector) error {
	if f.ctx.SubtaskIndex() == 0 && f.ctx.AttemptNumber() == 0 {
		return errors.New(injectedCause)
	}
	return nil
}
func (f *failFirstAttempt) Close() error { return nil }

func (c *cluster) getJSON(path string, v any) error {
	resp, err := http.Get(c.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (c *cluster) post(path, body string) map[string]any {
	c.t.Helper()
	resp, err := http.Post(c.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode/100 != 2 {
		c.t.Fatalf("POST %s: %s %v %v", path, resp.Status, m, err)
	}
	return m
}

func (c *cluster) waitFor(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	poll.Until(c.t, timeout, 100*time.Millisecond, what, func() (bool, string) { return cond(), "" })
}

func spec(name, sinkDir, checkpointing string) string {
	return fmt.Sprintf(`name: %s
checkpointing: %s
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 8, rate: 500}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: file-sink, parallelism: 2, inputs: [{from: sum, partition: forward}], config: {path: %q}}
`, name, checkpointing, sinkDir)
}

func (c *cluster) submit(spec string) string {
	c.t.Helper()
	g, err := jobgraph.ParseSpec([]byte(spec))
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		c.t.Fatal(err)
	}
	id := resp.GetJobId()
	c.waitFor(30*time.Second, "job "+id+" running", func() bool {
		var j map[string]any
		return c.getJSON("/jobs/"+id, &j) == nil && j["state"] == "RUNNING"
	})
	return id
}

// cancel cancels a job through the REST API and waits until it is. It
// reports on t, the test that ran the job, not on the cluster's test.
func (c *cluster) cancel(t testing.TB, job string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPatch, c.base+"/jobs/"+job+"?mode=cancel", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	poll.Until(t, 30*time.Second, 100*time.Millisecond, "job "+job+" cancelled", func() (bool, string) {
		var j map[string]any
		return c.getJSON("/jobs/"+job, &j) == nil && j["state"] == "CANCELED", ""
	})
}

// checkpoint triggers a checkpoint through the REST API and waits for it,
// retrying while the job's tasks are still starting.
func (c *cluster) checkpoint(job string) {
	c.t.Helper()
	poll.Until(c.t, 60*time.Second, 100*time.Millisecond, "a completed checkpoint", func() (bool, string) {
		tid := c.post("/jobs/"+job+"/checkpoints", "{}")["request-id"].(string)
		var op map[string]any
		poll.Until(c.t, 30*time.Second, 50*time.Millisecond, "checkpoint operation "+tid, func() (bool, string) {
			var st map[string]any
			if err := c.getJSON("/jobs/"+job+"/checkpoints/"+tid, &st); err != nil {
				c.t.Fatal(err)
			}
			s, _ := st["status"].(map[string]any)
			op, _ = st["operation"].(map[string]any)
			return s["id"] == "COMPLETED", fmt.Sprint(s["id"])
		})
		// A checkpoint triggered while the tasks still start fails; the
		// next attempt is made.
		return op["failureCause"] == nil, fmt.Sprint(op["failureCause"])
	})
}

func (c *cluster) checkpoints(job string) map[string]any {
	c.t.Helper()
	var m map[string]any
	if err := c.getJSON("/jobs/"+job+"/checkpoints", &m); err != nil {
		c.t.Fatal(err)
	}
	return m
}

// browser is one headless Chromium tab.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string

	mu     sync.Mutex
	errors []string // uncaught exceptions and console errors of the page
}

func newBrowser(t *testing.T, execPath string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	shots := os.Getenv("WEIR_WEBUI_SCREENSHOTS")
	if shots == "" {
		shots, _ = filepath.Abs("screenshots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx, shots: shots}
	go func() {
		for msg, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if msg.Type == chromedp.ConsoleException || msg.Type == chromedp.ConsoleError {
				b.mu.Lock()
				b.errors = append(b.errors, msg.Text)
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// wait polls a JavaScript predicate in the page.
func (b *browser) wait(what, expr string, timeout time.Duration) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		b.shot("failure-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Error(err)
	}
	b.t.Logf("screenshot: %s", p)
}

func (b *browser) checkNoErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		b.t.Errorf("the page logged errors: %q", b.errors)
	}
}

func TestDashboard(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		t.Skip("no chromium binary found; install Debian's chromium to run the browser tests")
	}
	if testing.Short() {
		t.Skip("browser tests are slow")
	}
	c := startCluster(t)
	// Periodic checkpoints are off in effect (1h), so the test controls
	// how many there are.
	job := c.submit(spec("dashboard-demo", t.TempDir(), "{interval: 1h, timeout: 1m, retained: 3}"))
	const triggered = 3
	for i := 0; i < triggered; i++ {
		c.checkpoint(job)
	}
	b := newBrowser(t, chrome)
	q := strconv.Quote

	t.Run("overview lists the TaskManagers and the job", func(t *testing.T) {
		b.t, c.t = t, t
		b.do(chromedp.Navigate(c.base + "/#/"))
		b.wait("the TaskManagers", `document.querySelectorAll("#tms-table tr.tm-row").length === 2`, 30*time.Second)
		b.wait("the job", fmt.Sprintf(`!!document.querySelector('tr.job-row[data-jid=%s]')`, q(job)), 30*time.Second)
		for _, tm := range []string{"tm-1", "tm-2"} {
			row := eval[string](b, fmt.Sprintf(`document.querySelector('tr.tm-row[data-tm=%s]').innerText`, q(tm)))
			if !strings.Contains(row, "/ 2") || !strings.Contains(row, "127.0.0.1:") {
				t.Errorf("TaskManager row %s = %q, want its slots and address", tm, row)
			}
		}
		row := eval[string](b, fmt.Sprintf(`document.querySelector('tr.job-row[data-jid=%s]').innerText`, q(job)))
		if !strings.Contains(row, "dashboard-demo") || !strings.Contains(row, "RUNNING") {
			t.Errorf("job row = %q", row)
		}
		b.shot("overview")
	})

	t.Run("job page draws the graph", func(t *testing.T) {
		b.t, c.t = t, t
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + job))
		b.wait("the graph", `document.querySelectorAll("#job-graph-svg .g-vertex").length === 3 && document.querySelectorAll("#job-graph-svg .g-edge").length === 2`, 30*time.Second)
		edges := eval[string](b, `[...document.querySelectorAll("#job-graph-svg .g-edge text")].map(e => e.textContent).join(",")`)
		if !strings.Contains(strings.ToLower(edges), "hash") || !strings.Contains(strings.ToLower(edges), "forward") {
			t.Errorf("edge labels = %q, want the hash and forward partitioners", edges)
		}
		box := eval[string](b, `document.querySelector('#job-graph-svg .g-vertex[data-vertex="sum"]').textContent`)
		if !strings.Contains(box, "parallelism 2") {
			t.Errorf("sum vertex = %q, want its parallelism", box)
		}
		b.shot("job")
	})

	completedInChart := func() (points, attr int) {
		points = eval[int](b, `document.querySelectorAll("#cp-chart-svg circle.cp-point").length`)
		attr = eval[int](b, `+document.querySelector("#cp-chart-svg").dataset.completed`)
		return
	}
	countCompleted := func(m map[string]any) (n int) {
		for _, h := range m["history"].([]any) {
			if h.(map[string]any)["className"] == "completed" {
				n++
			}
		}
		return n
	}

	t.Run("checkpoints chart has one point per completed checkpoint", func(t *testing.T) {
		b.t, c.t = t, t
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + job + "/checkpoints"))
		b.wait("the chart", fmt.Sprintf(`document.querySelectorAll("#cp-chart-svg circle.cp-point").length === %d`, triggered), 30*time.Second)
		want := countCompleted(c.checkpoints(job))
		if points, attr := completedInChart(); points != want || attr != want {
			t.Errorf("chart has %d points (data-completed %d), REST history has %d completed", points, attr, want)
		}
		rows := eval[int](b, `document.querySelectorAll("#cp-history-table tr.cp-row").length`)
		if rows != want {
			t.Errorf("history table has %d rows, want %d", rows, want)
		}
		checkNextCheckpoint(t, b, c, job)
		b.shot("checkpoints")
	})

	t.Run("savepoint triggered from the page", func(t *testing.T) {
		b.t, c.t = t, t
		dir := filepath.Join(c.ckpt, "savepoints", "from-the-page")
		b.do(
			chromedp.SetValue(chromedp.ID("savepoint-dir"), dir),
			// Accept the confirmation dialog: a real dialog blocks the page.
			chromedp.Evaluate[chromedp.Void](`window.__asked = []; window.confirm = (q) => { window.__asked.push(q); return true; }`),
			chromedp.Click(chromedp.ID("btn-savepoint")),
		)
		b.wait("the savepoint result", `document.querySelector("#action-result.ok")?.textContent.includes("Savepoint completed")`, 60*time.Second)
		if asked := eval[string](b, `window.__asked.join("|")`); !strings.Contains(asked, dir) {
			t.Errorf("confirmation asked %q, want it to name %s", asked, dir)
		}
		result := eval[string](b, `document.querySelector("#action-result").textContent`)
		resp, err := c.client.ListCheckpoints(context.Background(), &weirv1.ListCheckpointsRequest{JobId: job})
		if err != nil {
			t.Fatal(err)
		}
		sp := resp.GetLatestSavepoint()
		if sp == nil || !sp.GetIsSavepoint() || !strings.HasPrefix(sp.GetExternalPath(), dir) {
			t.Fatalf("ListCheckpoints latest savepoint = %v, want one under %s", sp, dir)
		}
		if !strings.Contains(result, strings.TrimSuffix(sp.GetExternalPath(), "/_metadata")) {
			t.Errorf("page says %q, want the savepoint's location %s", result, sp.GetExternalPath())
		}
		b.wait("the savepoint in the chart", `document.querySelectorAll("#cp-chart-svg circle.cp-point.savepoint").length === 1`, 30*time.Second)
		b.wait("the savepoint as latest", fmt.Sprintf(`document.querySelector("#latest-savepoint").textContent.includes("#%d")`, sp.GetId()), 30*time.Second)
		want := countCompleted(c.checkpoints(job))
		b.wait("every completed checkpoint in the chart", fmt.Sprintf(`document.querySelectorAll("#cp-chart-svg circle.cp-point").length === %d`, want), 30*time.Second)
		b.shot("checkpoints-after-savepoint")
	})

	t.Run("checkpoint detail shows every subtask", func(t *testing.T) {
		b.t, c.t = t, t
		latest := c.checkpoints(job)["latest"].(map[string]any)["completed"].(map[string]any)
		id := int(latest["id"].(float64))
		b.do(chromedp.Navigate(fmt.Sprintf("%s/#/jobs/%s/checkpoints/%d", c.base, job, id)))
		b.wait("the subtasks", `document.querySelectorAll(".vertex-panel").length === 3 && document.querySelectorAll("tr.subtask-row").length === 6`, 30*time.Second)
		head := eval[string](b, `document.querySelector("table.subtasks thead").innerText`)
		for _, col := range []string{"Acknowledged", "Sync", "Async", "Alignment", "Start delay"} {
			if !strings.Contains(head, col) {
				t.Errorf("subtask table header %q lacks %s", head, col)
			}
		}
		b.shot("checkpoint-detail")
	})

	t.Run("job graph shows back-pressure", func(t *testing.T) {
		b.t, c.t = t, t
		// The source emits as fast as it can; the sink takes a millisecond
		// per record, so the source and the sum in between wait for room.
		// The sink is not chained to the sum: chained, the two would be one
		// busy subtask, and the sum would never wait for room.
		slow := c.submit(`name: slow-sink
checkpointing: {interval: 1h, timeout: 1m}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 8, rate: 0}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: slow-sink, parallelism: 2, chaining: false, inputs: [{from: sum, partition: forward}]}
`)
		// Free the slots for the next subtest even when this one fails.
		t.Cleanup(func() { c.cancel(t, slow) })
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + slow))
		vertex := func(name string) string {
			return fmt.Sprintf(`document.querySelector('#job-graph-svg .g-vertex[data-vertex=%s]')`, q(name))
		}
		b.wait("the source back-pressured high", vertex("source")+`?.dataset.bp === "high"`, 60*time.Second)
		b.wait("the sum back-pressured high", vertex("sum")+`?.dataset.bp === "high"`, 60*time.Second)
		b.wait("the sink not back-pressured", vertex("sink")+`?.dataset.bp === "ok"`, 60*time.Second)
		// Records per second on the boxes, as the job details report them.
		outRate := func(name string) string {
			return fmt.Sprintf(`parseFloat((%s?.querySelector(".g-io")?.textContent || "").split("out ")[1] || "0")`, vertex(name))
		}
		b.wait("records per second on the source", outRate("source")+" > 0", 30*time.Second)
		b.wait("records per second on the sum", outRate("sum")+` > 0 && /in [1-9]/.test(`+vertex("sum")+`.querySelector(".g-io").textContent)`, 30*time.Second)
		// The colours differ between the levels, and the legend names them.
		fill := func(name string) string {
			return eval[string](b, fmt.Sprintf(`getComputedStyle(%s.querySelector("rect")).fill`, vertex(name)))
		}
		if high, ok := fill("source"), fill("sink"); high == ok {
			t.Errorf("a high and an ok vertex have the same fill %s", high)
		}
		if legend := eval[string](b, `document.querySelector("#bp-legend").textContent`); !strings.Contains(legend, "high") || !strings.Contains(legend, "low") {
			t.Errorf("legend = %q, want the levels", legend)
		}
		b.shot("job-backpressure")

		// A click on a vertex lists its subtasks.
		b.do(chromedp.Click(chromedp.CSS(`#job-graph-svg .g-vertex[data-vertex="source"]`)))
		b.wait("the source's subtasks", `document.querySelector('#bp-table[data-vertex="source"]') && document.querySelectorAll("#bp-table tr.bp-row").length === 2`, 30*time.Second)
		b.wait("a subtask back-pressured high", `document.querySelectorAll('#bp-table tr.bp-row[data-level="high"]').length > 0`, 30*time.Second)
		if head := eval[string](b, `document.querySelector("#bp-table thead").innerText`); !strings.Contains(head, "Back-pressured") || !strings.Contains(head, "Idle") || !strings.Contains(head, "Busy") {
			t.Errorf("subtask table header = %q", head)
		}
		b.shot("job-backpressure-subtasks")

		b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
			})
			return err
		}))
		b.wait("the source still high", vertex("source")+`?.dataset.bp === "high"`, 30*time.Second)
		if fill("source") == fill("sink") {
			t.Errorf("dark mode: a high and an ok vertex have the same fill")
		}
		b.shot("job-backpressure-dark")
		b.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}},
			})
			return err
		}))

		// At phone width the graph and the tables scroll inside their
		// panels, not the page.
		b.do(chromedp.EmulateViewport(400, 800))
		b.wait("the subtasks at 400px", `document.querySelectorAll("#bp-table tr.bp-row").length === 2`, 30*time.Second)
		if overflow := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`); overflow {
			t.Errorf("the job page scrolls sideways at 400px")
		}
		b.shot("job-backpressure-narrow")
		b.do(chromedp.EmulateViewport(1280, 800))

		// The checkpoints tab of the same job says when the next one is due.
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + slow + "/checkpoints"))
		b.wait("the counts", `document.querySelectorAll("#cp-counts .card").length === 5`, 30*time.Second)
		checkNextCheckpoint(t, b, c, slow)
		b.shot("checkpoints-next")

	})

	t.Run("failed checkpoint is marked with its reason", func(t *testing.T) {
		b.t, c.t = t, t
		failing := c.submit(spec("always-expiring", t.TempDir(), "{interval: 100ms, timeout: 1ms, tolerable-failed-checkpoints: 1000000}"))
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + failing + "/checkpoints"))
		b.wait("a failed checkpoint in the chart", `document.querySelectorAll("#cp-chart-svg g.cp-failed").length > 0`, 60*time.Second)
		title := eval[string](b, `document.querySelector("#cp-chart-svg g.cp-failed title").textContent`)
		if !strings.Contains(title, "failed") || !strings.Contains(title, "CHECKPOINT_EXPIRED") {
			t.Errorf("failed checkpoint title = %q, want its reason", title)
		}
		b.wait("the latest failure", `document.querySelector("#latest-failed .err")?.textContent.trim().length > 0`, 30*time.Second)
		b.shot("checkpoints-failed")

		// Cancel it from the page, answering the confirmation.
		b.do(
			chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
			chromedp.Click(chromedp.ID("btn-cancel")),
		)
		c.waitFor(30*time.Second, "the job cancelled", func() bool {
			var j map[string]any
			return c.getJSON("/jobs/"+failing, &j) == nil && j["state"] == "CANCELED"
		})
	})

	t.Run("event time panel says what holds the watermark back", func(t *testing.T) {
		b.t, c.t = t, t
		id := c.submit(`name: windows
checkpointing: {interval: 1h, timeout: 1m}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 8, rate: 200, event-time: {step: 1ms}}, watermarks: {max-out-of-orderness: 5ms, interval: 50ms}}
  - {name: counts, operator: window, parallelism: 1, inputs: [{from: source, partition: hash}], config: {type: tumbling, size: 100ms}}
  - {name: sink, operator: slow-sink, parallelism: 1, inputs: [{from: counts, partition: forward}]}
`)
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + id))
		b.wait("a watermark in the vertices table", `[...document.querySelectorAll('#vertices-table tr[data-vertex="counts"] td.wm-cell')].some((td) => /\d\d:\d\d:\d\d/.test(td.textContent))`, 60*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#job-graph-svg .g-vertex[data-vertex="counts"]`)))
		b.wait("the answer for the window", `/held back by source subtask [01] \(split sequence-/.test(document.querySelector("#wm-explanation")?.textContent || "")`, 30*time.Second)
		b.wait("the holding channel in bold", `document.querySelectorAll("#wm-table .wm-ch.holding").length > 0`, 30*time.Second)
		b.shot("job-event-time")
		b.checkNoErrors()
		if _, err := c.client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: id}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("exceptions list a failure, what it restarted and its cause", func(t *testing.T) {
		b.t, c.t = t, t
		// The demo job never failed.
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + job))
		b.wait("no exceptions", `document.querySelector("#exceptions-panel h2")?.textContent === "Exceptions" && document.querySelector("#exceptions #exceptions-empty")?.textContent === "No exceptions"`, 30*time.Second)
		// Its autoscaler is off, and the panel says how to turn it on.
		b.wait("the autoscaler off", `document.querySelector("#autoscaler #autoscaler-off")?.textContent.includes("autoscaler: {enabled: true}")`, 30*time.Second)

		// Subtask 0 of the sink fails once; forward edges make each
		// source and sink pair a region of its own, so only its region
		// restarts.
		failing := c.submit(`name: fails-once
checkpointing: {interval: 1h, timeout: 1m}
restart-strategy: {type: fixed-delay, attempts: 10, delay: 100ms}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 8, rate: 50}}
  - {name: sink, operator: fail-first-attempt, parallelism: 2, inputs: [{from: source, partition: forward}]}
`)
		var exc struct {
			History struct {
				Entries []struct {
					Timestamp     int64  `json:"timestamp"`
					TaskName      string `json:"taskName"`
					TaskManagerID string `json:"taskManagerId"`
					Endpoint      string `json:"endpoint"`
					Stacktrace    string `json:"stacktrace"`
					Regions       []int  `json:"regions"`
					FullRestart   bool   `json:"full-restart"`
				} `json:"entries"`
			} `json:"exceptionHistory"`
		}
		c.waitFor(60*time.Second, "the failure in /exceptions", func() bool {
			return c.getJSON("/jobs/"+failing+"/exceptions", &exc) == nil && len(exc.History.Entries) > 0
		})
		e := exc.History.Entries[0]
		if !strings.Contains(e.Stacktrace, injectedCause) {
			t.Fatalf("REST cause = %q, want it to hold %q", e.Stacktrace, injectedCause)
		}
		want := "not restarted"
		switch {
		case e.FullRestart:
			want = "whole job"
		case len(e.Regions) == 1:
			want = fmt.Sprintf("region %d", e.Regions[0])
		case len(e.Regions) > 1:
			want = "regions " + strings.Trim(strings.ReplaceAll(fmt.Sprint(e.Regions), " ", ", "), "[]")
		}
		t.Logf("REST exception: task %q on %s (%s), regions %v, full %v: the page must say %q", e.TaskName, e.TaskManagerID, e.Endpoint, e.Regions, e.FullRestart, want)

		b.do(chromedp.Navigate(c.base + "/#/jobs/" + failing))
		b.wait("the failure in the exceptions", `document.querySelectorAll("#exceptions-table tbody.exc-entry").length > 0`, 30*time.Second)
		b.wait("the restart count", `+document.querySelector("#job-restarts").textContent >= 1`, 30*time.Second)
		var got struct {
			Time, Task, TM, Restart, Cause string
			Injected                       int
			XSS                            bool
		}
		raw := eval[string](b, `(() => {
			const e = document.querySelector("#exceptions-table tbody.exc-entry");
			return JSON.stringify({
				Time: e.querySelector(".exc-time").innerText, Task: e.querySelector(".exc-task").innerText,
				TM: e.querySelector(".exc-tm").innerText, Restart: e.querySelector(".exc-restart").innerText,
				Cause: e.querySelector("pre.exc-cause").textContent,
				Injected: document.querySelectorAll("#exceptions-panel b, #exceptions-panel img, #exceptions-panel script").length,
				XSS: window.__xss !== undefined,
			});
		})()`)
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		if got.Time == "" || got.Time == "–" {
			t.Errorf("exception time = %q", got.Time)
		}
		if e.TaskName == "" || got.Task != e.TaskName {
			t.Errorf("exception task = %q, REST taskName %q", got.Task, e.TaskName)
		}
		if e.TaskManagerID == "" || !strings.Contains(got.TM, e.TaskManagerID) || !strings.Contains(got.TM, e.Endpoint) {
			t.Errorf("exception TaskManager = %q, want %s and %s", got.TM, e.TaskManagerID, e.Endpoint)
		}
		if got.Restart != want {
			t.Errorf("exception restarted = %q, want %q", got.Restart, want)
		}
		if got.Cause != e.Stacktrace {
			t.Errorf("exception cause = %q, want the stacktrace %q as text", got.Cause, e.Stacktrace)
		}
		if got.Injected != 0 || got.XSS {
			t.Errorf("the cause's markup became %d elements (script ran: %v)", got.Injected, got.XSS)
		}
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#exceptions-panel").scrollIntoView()`))
		b.shot("job-exceptions")

		// The sink's subtasks, with their regions and attempts as the
		// vertex details report them.
		var details struct {
			Vertices []struct{ ID, Name string } `json:"vertices"`
		}
		if err := c.getJSON("/jobs/"+failing, &details); err != nil {
			t.Fatal(err)
		}
		var sinkID string
		for _, v := range details.Vertices {
			if v.Name == "sink" {
				sinkID = v.ID
			}
		}
		var vd struct {
			Subtasks []struct {
				Subtask, Region, Attempt int
			} `json:"subtasks"`
		}
		if err := c.getJSON("/jobs/"+failing+"/vertices/"+sinkID, &vd); err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, s := range vd.Subtasks {
			rows = append(rows, fmt.Sprintf("%d:%d:%d", s.Subtask, s.Region, s.Attempt))
			if s.Subtask == 0 && (s.Attempt < 1 || (!e.FullRestart && !slices.Contains(e.Regions, s.Region))) {
				t.Errorf("failed subtask 0: region %d attempt %d, want attempt ≥ 1 in a restarted region %v", s.Region, s.Attempt, e.Regions)
			}
		}
		b.do(chromedp.Click(chromedp.CSS(`#job-graph-svg .g-vertex[data-vertex="sink"]`)))
		b.wait("the sink's subtasks with their regions", fmt.Sprintf(`[...document.querySelectorAll('#subtasks-table[data-vertex="sink"] tr.st-row')].map((r) => r.dataset.subtask + ":" + r.querySelector(".st-region").textContent + ":" + r.dataset.attempt).join(",") === %s`, q(strings.Join(rows, ","))), 30*time.Second)
		if head := eval[string](b, `document.querySelector("#subtasks-table thead").innerText`); !strings.Contains(head, "Region") || !strings.Contains(head, "Attempt") {
			t.Errorf("subtask table header = %q", head)
		}
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#st-panel").scrollIntoView()`))
		b.shot("job-subtasks-regions")

		if _, err := c.client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: failing}); err != nil {
			t.Fatal(err)
		}
		c.waitFor(30*time.Second, "the failing job cancelled", func() bool {
			var j map[string]any
			return c.getJSON("/jobs/"+failing, &j) == nil && j["state"] == "CANCELED"
		})
	})

	t.Run("a job named with markup is shown as text", func(t *testing.T) {
		b.t, c.t = t, t
		const name = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
		id := c.submit(`name: '` + name + `'
checkpointing: {interval: 1h, timeout: 1m}
vertices:
  - {name: source, operator: sequence-source, parallelism: 1, config: {count: 0, keys: 8, rate: 10}}
  - {name: sink, operator: '` + markupOperator + `', parallelism: 1, inputs: [{from: source, partition: forward}]}
`)
		var j map[string]any
		if err := c.getJSON("/jobs/"+id, &j); err != nil || j["name"] != name {
			t.Fatalf("REST name = %v (%v), want %q", j["name"], err, name)
		}
		injected := func(where string) int {
			return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%s).length`, q(where)))
		}

		b.do(chromedp.Navigate(c.base + "/#/"))
		row := fmt.Sprintf(`document.querySelector('tr.job-row[data-jid=%s]')`, q(id))
		b.wait("the job in the overview", row+`?.querySelector("a")?.innerText === `+q(name), 30*time.Second)
		if n := injected("#jobs-table script, #jobs-table img"); n != 0 {
			t.Errorf("the name became %d elements in the jobs table", n)
		}
		b.shot("overview-markup-name")

		b.do(chromedp.Navigate(c.base + "/#/jobs/" + id))
		b.wait("the name as the heading", `document.querySelector("#job-head h1")?.innerText === `+q(name), 30*time.Second)
		b.wait("the name in the breadcrumbs", `document.querySelector("#crumbs").innerText.includes(`+q(name)+`)`, 30*time.Second)
		if title := eval[string](b, `document.title`); title != name+" · Weir" {
			t.Errorf("title = %q", title)
		}
		// The operator's name is the sink box's text until its rates are
		// reported, and its tooltip.
		b.wait("the operator in the graph", `document.querySelector('#job-graph-svg .g-vertex[data-vertex="sink"] title')?.textContent.includes(`+q(markupOperator)+`)`, 30*time.Second)
		if n := injected("main script, main img, #crumbs script, #crumbs img"); n != 0 {
			t.Errorf("the name or the operator became %d elements in the job page", n)
		}
		if ran := eval[bool](b, `window.__xss !== undefined`); ran {
			t.Errorf("the name's script ran: window.__xss = %v", eval[string](b, `String(window.__xss)`))
		}
		b.shot("job-markup-name")
		if _, err := c.client.CancelJob(context.Background(), &weirv1.CancelJobRequest{JobId: id}); err != nil {
			t.Fatal(err)
		}
		c.waitFor(30*time.Second, "the job cancelled", func() bool {
			var j map[string]any
			return c.getJSON("/jobs/"+id, &j) == nil && j["state"] == "CANCELED"
		})
	})

	t.Run("a SQL job shows its statement and what each vertex runs", func(t *testing.T) {
		b.t, c.t = t, t
		const stmt = "SELECT k, v\n  FROM s\n  WHERE v < '<b>10</b>'"
		const calc = "Calc(where=[v < 10], select=[k, v])"
		id := c.submit(`name: select-1
sql: ` + strconv.Quote(stmt) + `
checkpointing: {interval: 1h, timeout: 1m}
vertices:
  - {name: source, operator: sequence-source, parallelism: 1, config: {count: 0, keys: 8, rate: 10}}
  - {name: calc, operator: slow-sink, parallelism: 1, description: '` + calc + `', inputs: [{from: source, partition: forward}]}
`)
		t.Cleanup(func() { c.cancel(t, id) })
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + id))
		b.wait("the statement", `!document.querySelector("#sql-panel").hidden && document.querySelector("#job-sql").textContent === `+q(stmt), 30*time.Second)
		if n := eval[int](b, `document.querySelectorAll("#job-sql b").length`); n != 0 {
			t.Errorf("the statement's markup became %d elements", n)
		}
		b.wait("the vertex's part of the plan", `document.querySelector('#vertices-table tr[data-vertex="calc"] .vertex-desc')?.textContent === `+q(calc), 30*time.Second)
		if n := eval[int](b, `document.querySelectorAll('#vertices-table tr[data-vertex="source"] .vertex-desc').length`); n != 0 {
			t.Errorf("the source, with no description, shows %d", n)
		}
		if title := eval[string](b, `document.querySelector('#job-graph-svg .g-vertex[data-vertex="calc"] title').textContent`); !strings.Contains(title, calc) {
			t.Errorf("graph tooltip = %q, want the description", title)
		}
		b.shot("job-sql")

		b.do(chromedp.Navigate(c.base + "/#/jobs/" + job))
		b.wait("the graph of a job with no SQL", `document.querySelectorAll("#job-graph-svg .g-vertex").length === 3`, 30*time.Second)
		if !eval[bool](b, `document.querySelector("#sql-panel").hidden && !document.querySelector(".vertex-desc")`) {
			t.Error("a job with no SQL shows a statement or descriptions")
		}
	})

	t.Run("narrow window and dark mode", func(t *testing.T) {
		b.t, c.t = t, t
		b.do(chromedp.EmulateViewport(400, 800), chromedp.Navigate(c.base+"/#/"))
		b.wait("the overview", `document.querySelectorAll("#tms-table tr.tm-row").length === 2`, 30*time.Second)
		if overflow := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`); overflow {
			t.Errorf("the overview scrolls sideways at 400px")
		}
		b.shot("overview-narrow")
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + job + "/checkpoints"))
		b.wait("the chart", `document.querySelectorAll("#cp-chart-svg circle.cp-point").length > 0`, 30*time.Second)
		if overflow := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`); overflow {
			t.Errorf("the checkpoints tab scrolls sideways at 400px")
		}
		b.shot("checkpoints-narrow")
		b.do(chromedp.EmulateViewport(1280, 800), chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
			})
			return err
		}))
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + job))
		b.wait("the graph", `document.querySelectorAll("#job-graph-svg .g-vertex").length === 3`, 30*time.Second)
		if bg := eval[string](b, `getComputedStyle(document.body).backgroundColor`); bg == "rgb(246, 247, 249)" {
			t.Errorf("dark mode kept the light background %s", bg)
		}
		b.shot("job-dark")
		b.do(chromedp.Navigate(c.base + "/#/jobs/" + job + "/checkpoints"))
		b.wait("the chart", `document.querySelectorAll("#cp-chart-svg circle.cp-point").length > 0`, 30*time.Second)
		b.shot("checkpoints-dark")
	})
	b.t, c.t = t, t
	b.checkNoErrors()
}

// checkNextCheckpoint checks the checkpoints tab's "next checkpoint" line
// against the REST answer: shown with the scheduler's state when the
// JobManager sends next_checkpoint, hidden when it does not.
func checkNextCheckpoint(t *testing.T, b *browser, c *cluster, job string) {
	t.Helper()
	next, ok := c.checkpoints(job)["next_checkpoint"].(map[string]any)
	if !ok {
		t.Log("the JobManager sends no next_checkpoint; the line must stay hidden")
		b.wait("the next-checkpoint line hidden", `document.querySelector("#cp-next").hidden`, 30*time.Second)
		return
	}
	want := map[string]string{"SCHEDULED": "Next checkpoint:", "DELAYED": "Next checkpoint delayed:", "NOT_SCHEDULED": "No checkpoint scheduled:"}[next["state"].(string)]
	if want == "" {
		t.Fatalf("next_checkpoint.state = %v, want SCHEDULED, DELAYED or NOT_SCHEDULED", next["state"])
	}
	b.wait("the next-checkpoint line", fmt.Sprintf(`!document.querySelector("#cp-next").hidden && document.querySelector("#cp-next").textContent.startsWith(%s)`, strconv.Quote(want)), 30*time.Second)
	text := eval[string](b, `document.querySelector("#cp-next").textContent`)
	if due, _ := next["due_timestamp"].(float64); next["state"] == "SCHEDULED" && due > 0 && !strings.Contains(text, "due ") {
		t.Errorf("next checkpoint line = %q, want when it is due (%v)", text, next)
	}
	t.Logf("next checkpoint: %s (REST %v)", text, next)
}
