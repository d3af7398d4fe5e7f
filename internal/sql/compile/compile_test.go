package compile

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirproject/weir/internal/sql/nexmarksql"
)

// The planner's scenarios (testdata/*.txt), one script per case:
//
//	plan    — compiles the script; prints each job's logical plan, its
//	          physical plan and its job graph's vertices and edges
//	error   — compiles the script, which must fail; prints the error
//	          with its position and the script's line it points at
//
// Run with -rewrite to update the expected output after a deliberate
// change, and read the diff.
func TestScenarios(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range paths {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			opts := Options{Parallelism: 2, CollectAddress: "127.0.0.1:1"}
			res, err := Script(d.Input, opts)
			switch d.Cmd {
			case "plan":
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
				var b strings.Builder
				for _, j := range res.Jobs {
					fmt.Fprintf(&b, "job %s\n", j.Name)
					b.WriteString("logical:\n" + indent(j.Explain.Logical))
					b.WriteString("physical:\n" + indent(j.Explain.Physical))
					b.WriteString("edges:\n")
					for _, v := range j.Graph.Vertices {
						for _, in := range v.Inputs {
							fmt.Fprintf(&b, "  %s -> %s (%s)\n", in.Source, v.Name, strings.ToLower(strings.TrimPrefix(in.Partitioner.String(), "PARTITIONER_")))
						}
					}
				}
				return b.String()
			case "error":
				if err == nil {
					t.Fatalf("%s: compiled, want an error", d.Pos)
				}
				e, ok := err.(*Error)
				if !ok {
					t.Fatalf("%s: error %v is a %T, not an *Error with a position", d.Pos, err, err)
				}
				lines := strings.Split(d.Input, "\n")
				at := ""
				if e.Line-1 < len(lines) {
					at = lines[e.Line-1]
				}
				return fmt.Sprintf("%v\n> %s\n", err, at)
			}
			t.Fatalf("%s: unknown command %s", d.Pos, d.Cmd)
			return ""
		})
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// TestNexmarkSuiteCompiles plans every Nexmark query of the SQL suite as
// its script is written (RisingWave's query texts).
func TestNexmarkSuiteCompiles(t *testing.T) {
	for _, q := range append(slices.Clone(nexmarksql.Names), nexmarksql.UpdatingNames...) {
		src := nexmarksql.Script(q, nexmarksql.ScriptOptions{Events: 1000, Splits: 2})
		res, err := Script(src, Options{Parallelism: 2})
		if err != nil {
			t.Errorf("%s: %v\n%s", q, err, src)
			continue
		}
		if len(res.Jobs) != 1 {
			t.Errorf("%s: %d jobs, want 1", q, len(res.Jobs))
		}
	}
}

// TestStateIdentity: a stateful vertex is named by what its state means,
// so a savepoint of a query restores into the query with other
// projections and filters around its window aggregate and join (the
// JobManager matches state to vertices by name), and not into one whose
// aggregate changed (it refuses state of a vertex the job does not have,
// naming it).
func TestStateIdentity(t *testing.T) {
	const src = `CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'sequence');
CREATE SINK out AS SELECT %s FROM TUMBLE(s, ts, INTERVAL '1' SECOND) %s GROUP BY k, window_start, window_end
WITH (connector = 'blackhole');`
	stateful := func(sel, where string) []string {
		t.Helper()
		res, err := Script(fmt.Sprintf(src, sel, where), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range res.Jobs[0].Graph.Vertices {
			if strings.HasPrefix(v.Name, "window-aggregate-") || strings.HasPrefix(v.Name, "source-") || strings.HasPrefix(v.Name, "sink-") {
				names = append(names, v.Name)
			}
		}
		return names
	}
	base := stateful("k, count(*) AS n", "")
	for _, same := range [][2]string{
		{"k, window_end, count(*) AS n, count(*) * 2 AS twice", ""},
		{"count(*) AS n", ""},
	} {
		if got := stateful(same[0], same[1]); !slices.Equal(got, base) {
			t.Errorf("SELECT %s %s: stateful vertices %v, want %v", same[0], same[1], got, base)
		}
	}
	if got := stateful("k, sum(v) AS n", ""); slices.Equal(got, base) {
		t.Errorf("another aggregate kept the vertices' names %v: its state would restore into it", got)
	}
}

// SET job.autoscaler.* configures the autoscaler of the jobs after it,
// with the defaults filled in as a job spec's are.
func TestAutoscalerSettings(t *testing.T) {
	res, err := Script(`CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector = 'sequence');
SET 'job.autoscaler.enabled' = 'true';
SET 'job.autoscaler.target-utilization' = '0.6';
SET 'job.autoscaler.metrics-window' = '2 min';
SET 'autoscaler.max-parallelism' = '8';
SET 'job.autoscaler.vertex.calc-1.max-parallelism' = '4';
CREATE SINK out AS SELECT k, v FROM s WHERE v > 1 WITH (connector = 'blackhole');`, Options{Parallelism: 2, CollectAddress: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Jobs[0].Graph.GetAutoscaler()
	if !a.GetEnabled() || a.GetTargetUtilization() != 0.6 || a.GetMetricsWindow().AsDuration() != 2*time.Minute ||
		a.GetMaxParallelism() != 8 || a.GetVertices()["calc-1"].GetMax() != 4 || a.GetInterval().AsDuration() == 0 {
		t.Fatalf("autoscaler %v", a)
	}
}

// SET execution.buffer-timeout reaches the job's graph, to the
// microsecond; a bare number is milliseconds, as Flink reads it.
func TestBufferTimeoutSetting(t *testing.T) {
	for v, want := range map[string]time.Duration{"'250 us'": 250 * time.Microsecond, "'2'": 2 * time.Millisecond, "'0 ms'": 0} {
		res, err := Script(`CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector = 'sequence');
SET 'execution.buffer-timeout' = `+v+`;
CREATE SINK out AS SELECT k, v FROM s WITH (connector = 'blackhole');`, Options{Parallelism: 2, CollectAddress: "127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Jobs[0].Graph.GetBufferTimeout(); got == nil || got.AsDuration() != want {
			t.Fatalf("%s: buffer timeout %v, want %s", v, got, want)
		}
	}
	_, err := Script(`SET 'execution.buffer-timeout' = '-1 ms';`, Options{})
	if err == nil || !strings.Contains(err.Error(), "execution.buffer-timeout wants a duration") {
		t.Fatalf("negative timeout: %v", err)
	}
}
