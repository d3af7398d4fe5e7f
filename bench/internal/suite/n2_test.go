package suite

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/sql/nexmarksql"
	"github.com/weirproject/weir/nexmark/queries"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestN2OnDemand checks the suite lists N2 as nexmark-sql, on demand, and
// that -only nexmark-sql (or N2) selects it and nothing else.
func TestN2OnDemand(t *testing.T) {
	if !onDemand["N2"] {
		t.Error("N2 is not on demand")
	}
	for _, sel := range []string{"nexmark-sql", "N2", "n2"} {
		var got []string
		for _, s := range All {
			if strings.EqualFold(sel, s.ID) || strings.EqualFold(sel, s.Name) {
				got = append(got, s.ID+" "+s.Name)
			}
		}
		if len(got) != 1 || got[0] != "N2 nexmark-sql" {
			t.Errorf("-only %s selects %q, want N2 nexmark-sql", sel, got)
		}
	}
}

// TestN2Scripts checks every SQL query, the updating ones included,
// compiles into one job graph as N2 submits it: p=2 everywhere, heap
// state, N1's checkpoint interval, the sources bounded to the events and
// split p ways, the blackhole sink (append-only, as RisingWave's
// benchmark); that every query has Flink's number, and RisingWave's at
// least where the Go API has a twin or the result updates.
func TestN2Scripts(t *testing.T) {
	const events = 1000
	names := n2Names()
	if len(names) != len(nexmarksql.Names)+len(nexmarksql.UpdatingNames) {
		t.Fatalf("n2Names %v, want Names %v and UpdatingNames %v", names, nexmarksql.Names, nexmarksql.UpdatingNames)
	}
	for i, q := range names {
		if i > 0 && n2Number(names[i-1]) >= n2Number(q) {
			t.Errorf("n2Names %v: not in the suite's order", names)
		}
		if n2Updating(q) != slices.Contains(nexmarksql.UpdatingNames, q) {
			t.Errorf("%s: updating %v", q, n2Updating(q))
		}
		if _, none := n2NoPeers[q]; none {
			if n2Flink(q) > 0 {
				t.Errorf("%s: a Flink number and a reason for none", q)
			}
		} else if n2Flink(q) <= 0 {
			t.Errorf("%s: no Flink number", q)
		} else if _, ok := n2RisingWave[q]; !ok && (n2Twin(q) || n2Updating(q)) {
			t.Errorf("%s: no RisingWave number (twin %v, updating %v)", q, n2Twin(q), n2Updating(q))
		}
		if !strings.Contains(n2Script(q, events), "force_append_only") {
			t.Errorf("%s: the sink is not forced append-only:\n%s", q, n2Script(q, events))
		}
		g, err := n2Graph(q, events)
		if err != nil {
			t.Fatal(err)
		}
		if g.GetState().GetBackend() != weirv1.StateBackendConfig_BACKEND_HEAP {
			t.Errorf("%s: state %v", q, g.GetState())
		}
		if d := g.GetCheckpointing().GetInterval().AsDuration(); d != n1Checkpoint {
			t.Errorf("%s: checkpoint interval %v, want %v", q, d, n1Checkpoint)
		}
		sources, sinks := 0, 0
		for _, v := range g.GetVertices() {
			if v.GetParallelism() != n1Parallelism {
				t.Errorf("%s: vertex %s p=%d", q, v.GetName(), v.GetParallelism())
			}
			cfg := v.GetConfig().AsMap()
			switch v.GetOperator() {
			case "nexmark-source":
				sources++
				if cfg["events"] != float64(events) || cfg["splits"] != float64(n1Parallelism) || cfg["rate"] != nil {
					t.Errorf("%s: source %s config %v", q, v.GetName(), cfg)
				}
			case "blackhole":
				sinks++
			}
		}
		if sources == 0 || sinks != 1 {
			t.Errorf("%s: %d sources, %d sinks", q, sources, sinks)
		}
	}
	for q := range n2RisingWave {
		if !slices.Contains(names, q) {
			t.Errorf("RisingWave's number of %s, which N2 does not run", q)
		}
	}
	// The twins are exactly the queries both have.
	var twins []string
	for _, q := range names {
		if n2Twin(q) {
			twins = append(twins, q)
		}
	}
	for _, q := range queries.Names {
		if slices.Contains(names, q) != slices.Contains(twins, q) {
			t.Errorf("%s: twin %v", q, slices.Contains(twins, q))
		}
	}
	if len(twins) == 0 {
		t.Error("no query has a Go API twin")
	}
}

// TestN2StockTaskManager checks the wrapper gives the stock TaskManager a
// state directory of its own, --pprof when profiling, the harness's flags,
// and execs.
func TestN2StockTaskManager(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "args")
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tm, err := n2StockTaskManager(filepath.Join(dir, "sql"), prog, true)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(tm); !strings.Contains(string(b), "exec '") {
		t.Errorf("script does not exec:\n%s", b)
	}
	if err := exec.Command(tm, "--slots", "2").Run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(args) != 5 || args[0] != "--state-dir" || !strings.HasPrefix(args[1], filepath.Join(dir, "sql")+"/state-") ||
		args[2] != "--pprof" || args[3] != "--slots" || args[4] != "2" {
		t.Errorf("args %q", args)
	}
}

func TestN2Order(t *testing.T) {
	first := map[string]int{}
	for i := range 4 {
		o := n2Order(i)
		if len(o) != 2 || o[0] == o[1] {
			t.Fatalf("order %d: %v", i, o)
		}
		first[o[0]]++
	}
	if first["go"] != 2 || first["sql"] != 2 {
		t.Errorf("first: %v", first)
	}
}
