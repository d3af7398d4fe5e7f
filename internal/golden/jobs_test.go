// Package golden_test restores savepoints of whole jobs written by an
// earlier release (committed in testdata) into this one: the job must
// finish with the committed output the release that wrote them recorded.
// Operator-level golden savepoints of the SQL operators are in
// internal/sql/ops, one of a Go API job in the module's root.
package golden_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/testcluster"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// yamlJob reads a bounded sequence on event time (the source's position in
// operator state) into a keyed sum (value state) and a tumbling window
// (its panes in map state, its end in a timer), each into a file sink
// (pending parts in operator state).
func yamlJob(out, state string) string {
	return fmt.Sprintf(`name: golden
checkpointing: {interval: 50ms, timeout: 1m}
state: %s
vertices:
  - {name: source, operator: sequence-source, parallelism: 1, config: {count: 6000, keys: 6, rate: 6000, event-time: {step: 1ms}}, watermarks: {max-out-of-orderness: 0ms, interval: 20ms}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - {name: windows, operator: window, parallelism: 2, inputs: [{from: source, partition: hash}], config: {type: tumbling, size: 100ms, aggregate: sum}}
  - {name: sums, operator: file-sink, parallelism: 2, inputs: [{from: sum, partition: forward}], config: {path: %q}}
  - {name: results, operator: file-sink, parallelism: 2, inputs: [{from: windows, partition: forward}], config: {path: %q}}
`, state, filepath.Join(out, "sums"), filepath.Join(out, "windows"))
}

const (
	heapState   = "{backend: heap}"
	pebbleState = "{backend: pebble}"
)

type cluster struct {
	t  *testing.T
	tc *testcluster.Cluster
}

func start(t *testing.T) *cluster {
	tc := testcluster.Start(t, testcluster.Options{})
	for i := range 2 {
		tc.StartTaskManager(fmt.Sprintf("tm-%d", i), 4, sdk.NewRegistry())
	}
	return &cluster{t: t, tc: tc}
}

func (c *cluster) submit(spec, from string) string {
	c.t.Helper()
	g, err := jobgraph.ParseSpec([]byte(spec))
	if err != nil {
		c.t.Fatal(err)
	}
	g.RestoreFrom = from
	resp, err := c.tc.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.GetJobId()
}

func (c *cluster) wait(id string, states ...weirv1.JobState) *weirv1.JobInfo {
	c.t.Helper()
	var info *weirv1.JobInfo
	poll.Until(c.t, 2*time.Minute, 20*time.Millisecond, "job "+id, func() (bool, string) {
		resp, err := c.tc.Client.GetJob(context.Background(), &weirv1.GetJobRequest{JobId: id})
		if err != nil {
			return false, err.Error()
		}
		info = resp.GetJob()
		return slices.Contains(states, info.GetState()), info.GetState().String()
	})
	return info
}

var ended = []weirv1.JobState{weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED, weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_RESTARTING}

// TestGoldenYAMLJob restores testdata/yaml-job, a savepoint of yamlJob
// taken part way with its sinks' directories as they were then, on the
// heap and on Pebble: each sink's committed output must be output.txt's,
// every line once. WEIR_GOLDEN_WRITE=1 writes a new one.
func TestGoldenYAMLJob(t *testing.T) {
	golden := filepath.Join("testdata", "yaml-job")
	if os.Getenv("WEIR_GOLDEN_WRITE") != "" {
		writeGolden(t, golden)
	}
	want, err := os.ReadFile(filepath.Join(golden, "output.txt"))
	if err != nil {
		t.Fatalf("%v (WEIR_GOLDEN_WRITE=1 writes the golden savepoint)", err)
	}
	for _, state := range []string{heapState, pebbleState} {
		t.Run(state, func(t *testing.T) {
			if got := restore(t, golden, state); got != string(want) {
				t.Fatalf("restored from %s, the job commits\n%.3000s\nwant (output.txt)\n%.3000s", golden, got, want)
			}
		})
	}
}

// restore runs yamlJob from golden's savepoint, its sinks' directories
// copies of golden/out, and returns what both sinks committed, sorted.
func restore(t *testing.T, golden, state string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if err := os.CopyFS(out, os.DirFS(filepath.Join(golden, "out"))); err != nil {
		t.Fatal(err)
	}
	sps, err := filepath.Glob(filepath.Join(golden, "savepoint-*"))
	if err != nil || len(sps) != 1 {
		t.Fatalf("%s holds savepoints %v: want one", golden, sps)
	}
	c := start(t)
	// The JobManager restores savepoints from its own directory only:
	// the golden one is moved there, as an operator would.
	sp := filepath.Join(c.tc.Dir, "checkpoints", "savepoints", filepath.Base(sps[0]))
	if err := os.CopyFS(sp, os.DirFS(sps[0])); err != nil {
		t.Fatal(err)
	}
	id := c.submit(yamlJob(out, state), sp)
	if info := c.wait(id, ended...); info.GetState() != weirv1.JobState_JOB_STATE_FINISHED {
		t.Fatalf("the restored job ended %s: %s", info.GetState(), info.GetFailureCause())
	}
	var all []string
	for _, sink := range []string{"sums", "windows"} {
		lines, err := check.ReadCommitted(filepath.Join(out, sink))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			all = append(all, sink+" "+l)
		}
	}
	slices.Sort(all)
	if dup := len(all) - len(slices.Compact(slices.Clone(all))); dup > 0 {
		t.Fatalf("%d lines committed twice", dup)
	}
	return strings.Join(all, "\n") + "\n"
}

// writeGolden runs yamlJob until part of its output is committed, stops
// it with a savepoint and keeps the savepoint and the sinks' directories
// in golden, then restores them once for the expected output.
func writeGolden(t *testing.T, golden string) {
	t.Helper()
	if err := os.RemoveAll(golden); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	c := start(t)
	id := c.submit(yamlJob(out, heapState), "")
	c.wait(id, weirv1.JobState_JOB_STATE_RUNNING)
	poll.Until(t, time.Minute, 20*time.Millisecond, "some committed output", func() (bool, string) {
		lines, _ := check.ReadCommitted(filepath.Join(out, "sums"))
		return len(lines) > 2000, fmt.Sprint(len(lines), " lines")
	})
	var sp *weirv1.StopWithSavepointResponse
	poll.Until(t, time.Minute, 50*time.Millisecond, "a stop with savepoint", func() (bool, string) {
		var err error
		sp, err = c.tc.Client.StopWithSavepoint(context.Background(), &weirv1.StopWithSavepointRequest{JobId: id})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	c.wait(id, ended...)
	dir := strings.TrimSuffix(sp.GetExternalPath(), "/_metadata")
	if err := os.CopyFS(filepath.Join(golden, filepath.Base(dir)), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(golden, "out"), os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	got := restore(t, golden, heapState)
	if err := os.WriteFile(filepath.Join(golden, "output.txt"), []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
}
