package suite

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/nexmark/queries"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestN1Queries checks that every query has its goal and Flink's number,
// and builds on every backend N1 runs.
func TestN1Queries(t *testing.T) {
	if len(queries.Names) != len(n1Goal) || len(queries.Names) != len(n1Flink) {
		t.Fatalf("%d queries, %d goals, %d Flink numbers", len(queries.Names), len(n1Goal), len(n1Flink))
	}
	for _, q := range queries.Names {
		if n1Goal[q] <= 0 || n1Flink[q] <= 0 {
			t.Errorf("%s: goal %v, Flink %v", q, n1Goal[q], n1Flink[q])
		}
		// The goals are 5 × Flink's events/s/core (q0–q2 share one of
		// 800k, within 10 % of theirs).
		if g, f := n1Goal[q], 5*n1Flink[q]; g < 0.9*f || g > 1.1*f {
			t.Errorf("%s: goal %v, 5 × Flink %v", q, g, f)
		}
		for _, backend := range n1Backends {
			o, err := n1Options(backend, 1000)
			if err != nil {
				t.Fatal(err)
			}
			j, err := queries.Build(q, o)
			if err != nil {
				t.Fatalf("%s %s: %v", q, backend, err)
			}
			g, err := j.Graph()
			if err != nil {
				t.Fatalf("%s %s: %v", q, backend, err)
			}
			for _, v := range g.GetVertices() {
				if v.GetParallelism() != n1Parallelism {
					t.Errorf("%s %s: vertex %s p=%d", q, backend, v.GetName(), v.GetParallelism())
				}
			}
		}
	}
	if _, err := n1Options("rocksdb", 1); err == nil {
		t.Error("n1Options: no error for an unknown backend")
	}
}

// TestN1Script checks the wrapper passes the query, an empty -out and the
// harness's flags, and execs (keeping the process ID).
func TestN1Script(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "args")
	// A stand-in program that writes its arguments, one a line.
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tm, err := n1TaskManager(filepath.Join(dir, "n1-q5"), prog, "q5", true)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(tm); !strings.Contains(string(b), "exec '") {
		t.Errorf("script does not exec:\n%s", b)
	}
	if err := exec.Command(tm, "--jobmanager", "127.0.0.1:1", "--slots", "2").Run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := []string{"-query", "q5", "-out", "", "taskmanager", "--state-dir", "", "--pprof", "--jobmanager", "127.0.0.1:1", "--slots", "2"}
	if len(args) != len(want) {
		t.Fatalf("args %q, want %q", args, want)
	}
	for i := range want {
		if i == 6 {
			if !strings.HasPrefix(args[i], filepath.Join(dir, "n1-q5")+"/state-") {
				t.Errorf("state dir %q", args[i])
			}
			continue
		}
		if args[i] != want[i] {
			t.Errorf("arg %d: %q, want %q (all: %q)", i, args[i], want[i], args)
		}
	}
}

// TestN1OnDemand checks a run without -only leaves N1 out.
func TestN1OnDemand(t *testing.T) {
	if !onDemand["N1"] {
		t.Error("N1 is not on demand")
	}
	found := false
	for _, s := range All {
		found = found || (s.ID == "N1" && s.Name == "nexmark")
	}
	if !found {
		t.Error("N1 (nexmark) is not in All")
	}
}

func TestN1JobTimeout(t *testing.T) {
	if d := n1JobTimeout(1000); d != 2*time.Minute {
		t.Errorf("1000 events: %v", d)
	}
	if d := n1JobTimeout(10_000_000); d != 2000*time.Second {
		t.Errorf("10 M events: %v", d)
	}
}

func TestN1Metrics(t *testing.T) {
	r := n1Result{Wall: 10 * time.Second, CPU: 15 * time.Second}
	perS, cores, perCore, ct := r.metrics(1_000_000)
	if perS != 100_000 || cores != 1.5 || perCore != 1_000_000.0/15 || ct != 15 {
		t.Errorf("got %v %v %v %v", perS, cores, perCore, ct)
	}
}

func TestN1PollEvery(t *testing.T) {
	for _, c := range []struct{ elapsed, want time.Duration }{
		{0, 10 * time.Millisecond},
		{time.Second, 10 * time.Millisecond},
		{10 * time.Second, 50 * time.Millisecond},
		{time.Hour, 250 * time.Millisecond},
	} {
		if got := n1PollEvery(c.elapsed); got != c.want {
			t.Errorf("n1PollEvery(%v) = %v, want %v", c.elapsed, got, c.want)
		}
	}
}

func TestN1FailedAtEnd(t *testing.T) {
	const end = 100_000
	for _, c := range []struct {
		reason weirv1.CheckpointFailureReason
		at     int64
		want   bool
	}{
		{weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_COORDINATOR_SHUTDOWN, end, true},
		{weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE, end - 500, true},
		{weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_TRIGGER_CHECKPOINT_FAILURE, end - 30_000, false},
		{weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_EXPIRED, end, false},
		{weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED, end, false},
	} {
		cs := &weirv1.CheckpointStats{Status: weirv1.CheckpointStatus_CHECKPOINT_STATUS_FAILED, FailureReason: c.reason, FailureTimestampMs: c.at}
		if got := n1FailedAtEnd(cs, end); got != c.want {
			t.Errorf("%v at end-%d ms: %v, want %v", c.reason, end-c.at, got, c.want)
		}
	}
}
