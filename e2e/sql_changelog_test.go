package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/internal/sql/changelog"
	"github.com/weirproject/weir/internal/sql/nexmarksql"
)

// TestSQLNexmarkChangelog runs the Nexmark queries whose results update
// (unbounded GROUP BY, ROW_NUMBER TopN and deduplication, an aggregate
// over an aggregate's changelog, q6's aggregate OVER a frame of a TopN's
// changelog) as RisingWave writes them, each into a
// file sink of type 'debezium': a changelog, committed with the file
// sink's two-phase commit. ONE `weir sql` submits them to a JobManager and
// two TaskManagers; after two checkpoints of every job a TaskManager is
// killed and replaced, every job restores and finishes. Then each sink's
// changelog is replayed in order (per subtask, by checkpoint): a change
// that adds a key already there, or retracts a row that is not there,
// fails the test (a duplicated or lost transition), and the final state,
// the latest row per key, must be one the query can produce over the
// events (nexmarksql.CheckFinal: exactly the oracle's, or for the TopN
// queries one of the rows their ties allow; q6's rows have no key, and
// replay as a multiset).
func TestSQLNexmarkChangelog(t *testing.T) {
	const (
		events         = 40_000
		firstEventRate = 1000
		gapNs          = 625_000 // 1,600 events/s of wall time: 25 s
		parallelism    = 2
	)
	start := time.Now()
	names := nexmarksql.UpdatingNames
	cfg := nexmark.Config{FirstEventRate: firstEventRate}

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
		return []nexmarksql.Option{{Key: "connector", Value: "file"}, {Key: "path", Value: filepath.Join(out, q)}, {Key: "type", Value: "debezium"}}
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
	killMidRun(t, c, names, ids, start)

	logs := map[string][]string{}
	for _, q := range names {
		t.Run(q, func(t *testing.T) {
			lines := readChangelog(t, filepath.Join(out, q))
			logs[q] = lines
			st, err := changelog.Replay(lines, nexmarksql.Key(q))
			if err != nil {
				t.Fatalf("%s: the changelog of %d changes does not replay: %v", q, len(lines), err)
			}
			if err := nexmarksql.CheckFinal(q, cfg, events, st.Rows(nil)); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			t.Logf("%s: %d changes replay to %d rows, a final state the query can produce", q, len(lines), st.Len())
		})
	}

	// The counter-proof: the replay rejects a changelog with a change
	// committed twice (an epoch written again) or lost, and the final
	// check a state missing a key's last change.
	t.Run("counter-proof", func(t *testing.T) {
		lines := logs["q17"]
		if len(lines) < 3 {
			t.Skip("q17's changelog was not read")
		}
		i := len(lines) / 2
		twice := slices.Insert(slices.Clone(lines), i, lines[i])
		if _, err := changelog.Replay(twice, nexmarksql.Key("q17")); err == nil {
			t.Fatal("q17's changelog with a change twice replays: the counter-proof did not happen")
		} else {
			t.Logf("as expected, a change committed twice is rejected: %v", err)
		}
		lost := slices.Delete(slices.Clone(lines), i, i+1)
		st, err := changelog.Replay(lost, nexmarksql.Key("q17"))
		if err == nil {
			err = nexmarksql.CheckFinal("q17", cfg, events, st.Rows(nil))
		}
		if err == nil {
			t.Fatal("q17's changelog without a change passes: the counter-proof did not happen")
		}
		t.Logf("as expected, a lost change is caught: %v", err)
	})
	t.Logf("the whole run took %v", time.Since(start).Round(time.Millisecond))
}

// readChangelog is the lines a file sink committed in dir, in the order
// they were written per subtask: part files sort by subtask, then by
// checkpoint (or epoch and sequence), as numbers. A key's changes all come
// from one subtask (the sink's input is keyed upstream, and a restore at
// the same parallelism keeps each key group where it was).
func readChangelog(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type part struct {
		name string
		nums []int64
	}
	var parts []part
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "part-")
		if e.IsDir() || !ok {
			continue
		}
		p := part{name: e.Name()}
		for _, f := range strings.Split(n, "-") {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("part file %s: not part-<subtask>-<checkpoint>[-<n>]", e.Name())
			}
			p.nums = append(p.nums, v)
		}
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b part) int { return slices.Compare(a.nums, b.nums) })
	var lines []string
	for _, p := range parts {
		b, err := os.ReadFile(filepath.Join(dir, p.name))
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSuffix(string(b), "\n"); s != "" {
			lines = append(lines, strings.Split(s, "\n")...)
		}
	}
	return lines
}
