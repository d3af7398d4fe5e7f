package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/check"
)

// TestCustomOperator runs a job whose operator comes from a user's
// taskmanager binary built with the public sdk and worker packages.
func TestCustomOperator(t *testing.T) {
	c := startClusterWith(t, 2, "custom-taskmanager")
	out := filepath.Join(c.dir, "out")
	spec, err := os.ReadFile("../examples/custom-operator/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.dir, "job.yaml")
	patched := strings.ReplaceAll(string(spec), "/tmp/weir-threshold-out", out)
	patched = strings.ReplaceAll(patched, "rate: 2000", "rate: 10000")
	if err := os.WriteFile(path, []byte(patched), 0o644); err != nil {
		t.Fatal(err)
	}
	idOut, err := c.weir("job", "submit", "-f", path)
	if err != nil {
		t.Fatal(err)
	}
	job := c.waitJob(strings.TrimSpace(string(idOut)), 2*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	lines, err := check.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	// Every key's sum passes one million (key 0 reaches 24,990,000), and
	// the operator fires once per key.
	seen := map[string]bool{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1_000_000 || seen[k] {
			t.Fatalf("unexpected output line %q in %v", l, lines)
		}
		seen[k] = true
	}
	if len(seen) != 8 {
		t.Fatalf("threshold fired for %d keys, want 8: %v", len(seen), lines)
	}
}
