package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
)

// TestStateDumpBootstrapRoundTrip: the savepoint of a running sum, dumped
// with `weir state dump` and written back with `weir state bootstrap`
// into a new savepoint, restores into the same output as the savepoint
// itself, exactly once, on the heap and on Pebble.
func TestStateDumpBootstrapRoundTrip(t *testing.T) {
	for _, backend := range []string{"heap", "pebble"} {
		t.Run(backend, func(t *testing.T) { stateRoundTrip(t, backend) })
	}
}

func stateRoundTrip(t *testing.T, backend string) {
	// About 10 s of input (4,000 records/s per source subtask): the first
	// job must still run when it is stopped after two checkpoints, also on
	// a loaded machine (with 2.5 s it once finished first).
	const count, keys = 80000, 16
	c := startCluster(t, 2)
	// spec is the job writing into out, in a directory of its own.
	spec := func(name, out string) string {
		dir := filepath.Join(c.dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := writeSpec(t, dir, out, count, keys, 4000, "200ms")
		if backend == "pebble" {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b = []byte(strings.Replace(string(b), "vertices:", "state: {backend: pebble, incremental: true}\nvertices:", 1))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	out := filepath.Join(c.dir, "out")
	savepoint := c.runThenStop(spec("first", out))

	dump, err := c.weir("state", "dump", savepoint)
	if err != nil {
		t.Fatalf("%v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), `"vertex":"sum"`) || !strings.Contains(string(dump), `"vertex":"source"`) {
		t.Fatalf("the dump lacks the sum's or the source's state:\n%.2000s", dump)
	}
	dumpFile := filepath.Join(c.dir, "dump.jsonl")
	if err := os.WriteFile(dumpFile, dump, 0o644); err != nil {
		t.Fatal(err)
	}
	bootstrapped := filepath.Join(c.savepointDir(), "bootstrapped")
	if b, err := c.weir("state", "bootstrap", savepoint, "--from", dumpFile, "--out", bootstrapped); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}

	// Each restore writes into its own copy of the sink's directory as
	// the stop left it.
	resume := func(name, from string) []string {
		o := filepath.Join(c.dir, name+"-out")
		if err := os.CopyFS(o, os.DirFS(out)); err != nil {
			t.Fatal(err)
		}
		id := c.submit(spec(name, o), "--from", from)
		if job := c.waitJob(id, 2*time.Minute); job.State != "FINISHED" {
			t.Fatalf("%s: the job ended %s: %s", name, job.State, job.FailureCause)
		}
		lines, err := check.ReadCommitted(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := check.RunningSum(lines, count, keys); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		slices.Sort(lines)
		return lines
	}
	original, roundTrip := resume("from-savepoint", savepoint), resume("from-bootstrap", bootstrapped)
	if !slices.Equal(original, roundTrip) {
		t.Fatalf("restored from the bootstrapped savepoint, the job commits %d lines; from the savepoint, %d (not the same)", len(roundTrip), len(original))
	}
}
