package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// TestSQLStateTTLFlat: a regular join on a key space that never repeats
// (every record a new key) keeps every row forever; with
// table.exec.state.ttl the same join drops each key's rows once idle for
// the TTL, and its checkpointed state stays flat. Both jobs run side by
// side for WEIR_SQL_TTL_SOAK (20s by default; `make soak-sql-ttl` runs
// minutes) and the join vertex's state size is sampled at checkpoints: the
// job without TTL must grow (which shows the test measures something),
// the one with it must not.
func TestSQLStateTTLFlat(t *testing.T) {
	t.Parallel()
	soak := soakDuration(t, "WEIR_SQL_TTL_SOAK", 20*time.Second)
	c := startCluster(t, 1)
	// Key i on both sides, at 500 records/s per subtask: each key joins
	// once and is never seen again.
	const sources = `CREATE SOURCE a (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector = 'sequence', keys = '1000000000000', rate = '500');
CREATE SOURCE b (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector = 'sequence', keys = '1000000000000', rate = '500');
`
	script := sources + `CREATE SINK grows AS SELECT a.k, a.v, b.v AS w FROM a JOIN b ON a.k = b.k WITH (connector = 'blackhole');
SET table.exec.state.ttl = '2s';
CREATE SINK flat AS SELECT a.k, a.v, b.v AS w FROM a JOIN b ON a.k = b.k WITH (connector = 'blackhole');`
	out, err := c.weir("sql", "-p", "1", "--checkpoint-interval", "1s", "-e", script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ids := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, id, _ := strings.Cut(l, ": ")
		ids[name] = strings.TrimSpace(id)
	}
	if ids["grows"] == "" || ids["flat"] == "" {
		t.Fatalf("weir sql printed %q", out)
	}
	samples := c.sampleStateSizes(ids, "regular-join-", soak)
	for _, id := range ids {
		if _, err := c.weir("job", "cancel", id); err != nil {
			t.Logf("cancel %s: %v", id, err)
		}
	}
	t.Logf("join state without TTL: %v", samples["grows"])
	t.Logf("join state with a TTL of 2s: %v", samples["flat"])
	checkGrows(t, "the join without TTL", samples["grows"], soak)
	checkFlat(t, "the join with a TTL", samples["flat"])
}

// soakDuration is the soak's length from the environment variable env, or
// def for make test's short run.
func soakDuration(t *testing.T, env string, def time.Duration) time.Duration {
	if v := os.Getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, v, err)
		}
		return d
	}
	return def
}

// sampleStateSizes samples, for soak, the state size of the vertices
// named with prefix in each job's latest completed checkpoint, one sample
// per job at each of its checkpoints: ids are the jobs by name.
func (c *cluster) sampleStateSizes(ids map[string]string, prefix string, soak time.Duration) map[string][]int64 {
	c.t.Helper()
	client, ctx := c.client()
	state := func(job string) (int64, int64) {
		cps, err := client.ListCheckpoints(ctx, &weirv1.ListCheckpointsRequest{JobId: job})
		if err != nil || cps.GetLatestCompleted() == nil {
			return 0, 0
		}
		id := cps.GetLatestCompleted().GetId()
		cp, err := client.GetCheckpoint(ctx, &weirv1.GetCheckpointRequest{JobId: job, CheckpointId: id})
		if err != nil {
			return 0, 0
		}
		var size int64
		for _, s := range cp.GetSubtasks() {
			if strings.HasPrefix(s.GetVertex(), prefix) {
				size += s.GetStateSize()
			}
		}
		return id, size
	}
	samples := map[string][]int64{}
	start := time.Now()
	last := map[string]int64{}
	fewest := func() int {
		n := -1
		for name := range ids {
			if n < 0 || len(samples[name]) < n {
				n = len(samples[name])
			}
		}
		return n
	}
	// The soak, and on a loaded machine (whose checkpoints come slower
	// than their interval) as long as it takes to have the samples the
	// checks need, up to four soaks.
	for time.Since(start) < soak || fewest() < minStateSamples && time.Since(start) < 4*soak {
		// A sample per job at its next completed checkpoint: each job's
		// taken as soon as it comes, until all have theirs.
		advanced := map[string]bool{}
		c.waitFor(30*time.Second, "the next checkpoints", func() (bool, error) {
			for name, id := range ids {
				if advanced[name] {
					continue
				}
				if cp, size := state(id); cp > last[name] {
					samples[name] = append(samples[name], size)
					last[name], advanced[name] = cp, true
				}
			}
			return len(advanced) == len(ids), nil
		})
	}
	return samples
}

// minStateSamples is how many samples checkGrows and checkFlat need.
const minStateSamples = 10

// checkGrows: state kept without a TTL grows with the keys seen, the last
// sample well above the one a quarter in (which shows a test of flatness
// measures something).
func checkGrows(t *testing.T, what string, g []int64, soak time.Duration) {
	t.Helper()
	if len(g) < 8 {
		t.Fatalf("%s: only %d checkpoints in %v", what, len(g), soak)
	}
	if q := g[len(g)/4]; g[len(g)-1] < q+q/2 {
		t.Fatalf("%s did not grow (%v): the test measures nothing", what, g)
	}
}

// checkFlat: state with a TTL holds the keys of the last TTL and a bit,
// once the TTL has passed. The smallest of the last three samples is
// compared with the largest of the early ones (after the first TTL), so
// that one slow checkpoint's spike is not growth.
func checkFlat(t *testing.T, what string, f []int64) {
	t.Helper()
	if len(f) < 8 {
		t.Fatalf("%s: only %d checkpoints", what, len(f))
	}
	early := f[3]
	for _, v := range f[3:6] {
		early = max(early, v)
	}
	late := min(f[len(f)-1], f[len(f)-2], f[len(f)-3])
	if late > 2*early+64<<10 {
		t.Fatalf("%s grows: %v", what, f)
	}
}
