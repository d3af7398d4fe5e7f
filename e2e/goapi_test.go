package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
)

// The Go API's examples, each one program: it submits its job to the
// stock JobManager, and two of its own TaskManagers run it. A TaskManager
// is killed after two checkpoints; the committed output must be exactly
// what the same computation in plain Go gives (written out again here, as
// a reader would check it).

// submitProgram runs `<program> submit` with env, returning the job ID.
func (c *cluster) submitProgram(program string, env ...string) string {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, program), "submit", "--jobmanager", c.jmAddr)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			c.t.Fatalf("%s submit: %v: %s", program, err, ee.Stderr)
		}
		c.t.Fatalf("%s submit: %v", program, err)
	}
	return strings.TrimSpace(string(out))
}

// runProgramWithKill runs program's job on 2 of its TaskManagers, kills
// one after two checkpoints and replaces it, and returns the committed
// lines in out.
func runProgramWithKill(t *testing.T, program, out string, env ...string) []string {
	t.Helper()
	c := startClusterWith(t, 2, program)
	id := c.submitProgram(program, env...)
	tms := append([]*process(nil), c.procs[1:]...)
	if c.killTaskManagers(id, tms, 1) == 0 {
		t.Fatal("the job ended before a TaskManager could be killed: make it longer")
	}
	job := c.waitJob(id, 3*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if job.Restarts < 1 {
		t.Fatalf("job restarted %d times after a kill", job.Restarts)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d restarts, %d lines committed", program, job.Restarts, len(lines))
	return lines
}

var wordcountWords = strings.Fields("the quick brown fox jumps over the lazy dog while a stream of words flows past")

func wordcountLine(i int64) []string {
	var ws []string
	for k := range int64(5) {
		ws = append(ws, wordcountWords[(i*7+k*k*3)%int64(len(wordcountWords))])
	}
	return ws
}

func TestGoAPIWordCount(t *testing.T) {
	t.Parallel()
	const lines = 20000
	out := filepath.Join(t.TempDir(), "out")
	got := runProgramWithKill(t, "example-wordcount", out, "WORDCOUNT_OUT="+out, fmt.Sprintf("WORDCOUNT_LINES=%d", lines), "WORDCOUNT_RATE=2000")
	total := map[string]int64{}
	for i := range int64(lines) {
		for _, w := range wordcountLine(i) {
			total[w]++
		}
	}
	counts := map[string][]int64{}
	for _, l := range got {
		w, c, _ := strings.Cut(l, ",")
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			t.Fatalf("line %q", l)
		}
		counts[w] = append(counts[w], n)
	}
	for w, n := range total {
		cs := counts[w]
		slices.Sort(cs)
		if int64(len(cs)) != n {
			t.Fatalf("word %q: %d running counts, want %d (%s)", w, len(cs), n, lostOrDuplicated(len(cs), int(n)))
		}
		for i, c := range cs {
			if c != int64(i+1) {
				t.Fatalf("word %q: running count %d lost or duplicated", w, i+1)
			}
		}
	}
}

func lostOrDuplicated(got, want int) string {
	if got < want {
		return fmt.Sprintf("%d lost", want-got)
	}
	return fmt.Sprintf("%d duplicated", got-want)
}

func TestGoAPIInactivityAlert(t *testing.T) {
	t.Parallel()
	const events, silence = 70000, 10_000
	out := filepath.Join(t.TempDir(), "out")
	got := runProgramWithKill(t, "example-inactivity-alert", out, "ALERT_OUT="+out, fmt.Sprintf("ALERT_EVENTS=%d", events), "ALERT_RATE=4000")
	// The devices' events in time order; a gap longer than the silence is
	// an alert, and so is each device's last event (the input ends).
	last := map[string]int64{}
	var want []string
	for i := range int64(events) {
		d := i % 16
		if d == 3 && i%60_000 >= 40_000 {
			d = 4
		}
		dev := fmt.Sprintf("device-%02d", d)
		if l, ok := last[dev]; ok && i-l > silence {
			want = append(want, fmt.Sprintf("%s,%d", dev, l))
		}
		last[dev] = i
	}
	for dev, l := range last {
		want = append(want, fmt.Sprintf("%s,%d", dev, l))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("alerts\n  %v\nwant\n  %v", got, want)
	}
}

func TestGoAPIWindowedTotals(t *testing.T) {
	t.Parallel()
	const payments = 30000
	out := filepath.Join(t.TempDir(), "out")
	got := runProgramWithKill(t, "example-windowed-totals", out, "TOTALS_OUT="+out, fmt.Sprintf("TOTALS_PAYMENTS=%d", payments), "TOTALS_RATE=3000")
	type total struct{ cents, n int64 }
	totals := map[string]*total{}
	for i := range int64(payments) {
		ts := i - i%51 // the generator's event time: 1 ms steps, 50 ms jitter
		acct := fmt.Sprintf("acct-%d", i%7)
		start := ts / 1000 * 1000
		id := fmt.Sprintf("%s,%d,%d", acct, start, start+1000)
		if totals[id] == nil {
			totals[id] = &total{}
		}
		totals[id].cents += (i * 37) % 1000
		totals[id].n++
	}
	var want []string
	for id, tt := range totals {
		want = append(want, fmt.Sprintf("%s,%d,%d", id, tt.cents, tt.n))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%d windows committed, want %d; first differences: %v", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("got %q, want %q", got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
