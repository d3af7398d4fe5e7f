package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/internal/sql/nexmarksql"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestSQLNexmark runs the Nexmark queries as RisingWave writes them
// (internal/sql/nexmarksql) through the SQL front end, as a user does: ONE
// `weir sql -f script.sql -p 2` submits a job per query (the three nexmark
// sources, then a CREATE SINK nexmark_qN … WITH (connector = 'file') per
// query) to a JobManager and two stock TaskManagers with slots enough for
// every job on either. After every job completed two checkpoints (their
// interval set to 1 s, as `weir checkpoint configure --interval 1s` does)
// a TaskManager is killed and replaced; every job must restart from its
// checkpoints, finish, and have committed exactly the oracle's lines: the
// same query computed in plain Go over the same events (q12, whose windows
// are of processing time, summed per bidder: each bid counted once).
//
// The events' event time runs at 1,000 events/s, so the bounded run spans
// four 10 s tumbling windows, twenty-four hop windows and the bidders'
// sessions; the whole stream is paced at nexmark.min.event.gap.in.ns (the
// nexmark-source's rate) so that the kill comes mid-run, at a load two
// cores under -race carry for fourteen jobs at once.
func TestSQLNexmark(t *testing.T) {
	const (
		events         = 40_000
		firstEventRate = 1000
		gapNs          = 625_000 // 1,600 events/s of wall time: 25 s
		parallelism    = 2
	)
	start := time.Now()
	names := nexmarksql.Names
	cfg := nexmark.Config{FirstEventRate: firstEventRate}
	want := map[string][]string{}
	for _, q := range names {
		lines, err := nexmarksql.Oracle(q, cfg, events)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			t.Fatalf("the oracle gives no %s rows for %d events: nothing would be checked", q, events)
		}
		want[q] = lines
	}

	// Each job takes parallelism slots (one slot-sharing group); either
	// TaskManager can hold them all.
	slots := parallelism * len(names)
	c := &cluster{t: t, dir: t.TempDir(), jmAddr: freePort(t), jmHTTP: freePort(t), tmArgs: []string{"--slots", strconv.Itoa(slots)}}
	startClusterProcs(c, 2, "taskmanager")
	out := filepath.Join(c.dir, "out")
	script := nexmarksql.Suite(names, nexmarksql.ScriptOptions{
		Events:        events,
		Splits:        parallelism,
		Generator:     cfg,
		SourceOptions: []nexmarksql.Option{{Key: "nexmark.min.event.gap.in.ns", Value: strconv.Itoa(gapNs)}},
	}, func(q string) []nexmarksql.Option {
		return []nexmarksql.Option{{Key: "connector", Value: "file"}, {Key: "path", Value: filepath.Join(out, q)}, {Key: "format", Value: "csv"}}
	})
	path := filepath.Join(c.dir, "nexmark.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.weir("sql", "-f", path, "-p", strconv.Itoa(parallelism))
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s", err, stdout)
	}
	ids := sqlJobIDs(t, string(stdout), names)
	t.Logf("%d jobs submitted %v after the start", len(ids), time.Since(start).Round(time.Millisecond))

	killMidRun(t, c, names, ids, start)

	got := map[string][]string{}
	for _, q := range names {
		t.Run(q, func(t *testing.T) {
			lines, err := check.ReadCommitted(filepath.Join(out, q))
			if err != nil {
				t.Fatal(err)
			}
			got[q] = lines
			w := want[q]
			if q == "q12" {
				if lines, err = sumPerBidder(lines); err != nil {
					t.Fatal(err)
				}
			}
			if err := check.Lines(lines, w); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			t.Logf("%s: %d lines committed, exactly the oracle's", q, len(got[q]))
		})
	}

	// The counter-proof: the checker rejects what a sink without
	// two-phase commit would have left after the restart, the rows of an
	// epoch written again (the jobs have no at-least-once option to run
	// that for real, and q0's one-input pipeline would align its barriers
	// trivially anyway), and what a lost epoch leaves. One committed part
	// file of q0 is such an epoch.
	t.Run("counter-proof", func(t *testing.T) {
		lines, epoch := got["q0"], committedPart(t, filepath.Join(out, "q0"))
		if lines == nil {
			t.Skip("q0's output was not read")
		}
		err := check.Lines(append(slices.Clone(lines), epoch...), want["q0"])
		if err == nil || !strings.Contains(err.Error(), "duplicated") {
			t.Fatalf("q0's output with an epoch committed twice: the checker says %v: the counter-proof did not happen", err)
		}
		t.Logf("as expected, the checker rejects an epoch committed twice: %v", err)
		lost := slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return slices.Contains(epoch, l) })
		if err := check.Lines(lost, want["q0"]); err == nil || !strings.Contains(err.Error(), "lost") {
			t.Fatalf("q0's output without an epoch: the checker says %v: the counter-proof did not happen", err)
		}
		// And q12's check, whose lines are summed: a window's row twice.
		q12 := got["q12"]
		if len(q12) > 0 {
			sums, err := sumPerBidder(append(slices.Clone(q12), q12[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Lines(sums, want["q12"]); err == nil {
				t.Fatal("q12's output with a row twice passed the checker: the counter-proof did not happen")
			}
		}
	})
	t.Logf("the whole run took %v", time.Since(start).Round(time.Millisecond))
}

// sqlJobIDs reads `weir sql`'s "<sink name>: <job ID>" lines: a job for
// every query's sink nexmark_qN, and nothing else.
func sqlJobIDs(t *testing.T, stdout string, names []string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		sink, id, ok := strings.Cut(l, ": ")
		q, isQuery := strings.CutPrefix(sink, "nexmark_")
		if !ok || !isQuery || !slices.Contains(names, q) || ids[q] != "" || strings.TrimSpace(id) == "" {
			t.Fatalf("weir sql printed %q, want \"nexmark_qN: <job ID>\" per query; all of it:\n%s", l, stdout)
		}
		ids[q] = strings.TrimSpace(id)
	}
	if len(ids) != len(names) {
		t.Fatalf("weir sql submitted %v, want a job for each of %v; it printed:\n%s", slices.Sorted(maps.Keys(ids)), names, stdout)
	}
	return ids
}

// sumPerBidder turns q12's rows (bidder, bid_count, window_start,
// window_end) into the oracle's: bidder, the sum of its counts.
func sumPerBidder(lines []string) ([]string, error) {
	sums := map[string]int64{}
	for _, l := range lines {
		f := strings.Split(l, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("q12: line %q: want bidder,bid_count,window_start,window_end", l)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("q12: line %q: bid_count %q", l, f[1])
		}
		sums[f[0]] += n
	}
	var out []string
	for bidder, n := range sums {
		out = append(out, fmt.Sprintf("%s,%d", bidder, n))
	}
	return out, nil
}

// committedPart is the lines of the largest committed part file in dir:
// one epoch of one subtask.
func committedPart(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var best string
	var size int64
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() > size {
			best, size = e.Name(), info.Size()
		}
	}
	if best == "" {
		t.Fatalf("no committed part file with lines in %s", dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, best))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// killMidRun sets the jobs of the queries names (their IDs in ids) to
// checkpoint every second, kills a TaskManager once every job completed
// two checkpoints and replaces it, and waits for every job to finish
// after at least one restart; it fails the test otherwise.
func killMidRun(t *testing.T, c *cluster, names []string, ids map[string]string, start time.Time) {
	t.Helper()
	client, ctx := c.client()
	for _, q := range names {
		if _, err := client.ConfigureCheckpointing(ctx, &weirv1.ConfigureCheckpointingRequest{JobId: ids[q], Interval: durationpb.New(time.Second)}); err != nil {
			t.Fatalf("%s: configure checkpointing of job %s: %v", q, ids[q], err)
		}
	}

	// Every job two checkpoints, then one TaskManager killed and replaced.
	c.waitFor(2*time.Minute, "two checkpoints of every job", func() (bool, error) {
		for _, q := range names {
			job, err := client.GetJob(ctx, &weirv1.GetJobRequest{JobId: ids[q]})
			if err != nil {
				return false, nil // the JobManager may be busy
			}
			switch st := job.GetJob().GetState(); st {
			case weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED:
				return false, fmt.Errorf("%s: job %s ended %v before the kill (%s): make the run longer", q, ids[q], st, job.GetJob().GetFailureCause())
			}
			cps, err := client.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: ids[q]})
			if err != nil || cps.GetCounts().GetCompleted() < 2 {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("every job completed two checkpoints %v after the start: killing a TaskManager", time.Since(start).Round(time.Millisecond))
	victim := c.procs[1]
	c.kill(victim)
	c.startTaskManager(victim.Name, "tm-k0")

	failed := false
	deadline := time.Now().Add(3 * time.Minute)
	for _, q := range names {
		job := c.waitJob(ids[q], max(time.Until(deadline), time.Second))
		switch {
		case job.State != "FINISHED":
			failed = true
			exc, _ := c.weir("job", "exceptions", ids[q])
			t.Errorf("%s: job %s ended %s: %s\nexceptions:\n%s", q, ids[q], job.State, job.FailureCause, exc)
		case job.Restarts < 1:
			failed = true
			t.Errorf("%s: job %s restarted %d times after a kill of a TaskManager holding half its slots", q, ids[q], job.Restarts)
		}
	}
	t.Logf("every job ended %v after the start", time.Since(start).Round(time.Millisecond))
	if failed {
		t.FailNow()
	}

}
