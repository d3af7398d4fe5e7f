package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/internal/kafka/kafkatest"
	"github.com/weirproject/weir/internal/sql/changelog"
)

// TestSQLKafkaUpsert writes an unbounded GROUP BY into an upsert Kafka
// sink (FORMAT UPSERT: the message key is the group's key, a tombstone
// deletes it), exactly once, through a TaskManager kill: a HAVING that
// drops a group whenever its count is 3 modulo 7 makes the changelog
// delete and re-insert every group many times. A read_committed consumer
// folding the topic (latest value per key, tombstones deleting) must see
// exactly the batch result. Then a second job reads the topic back as an
// upsert source (the latest row per key, tombstones as deletions,
// normalized into a changelog) and aggregates it again into a Debezium
// file sink, whose replayed changelog must hold the batch result too.
func TestSQLKafkaUpsert(t *testing.T) {
	t.Parallel()
	const count, keys = 20000, 50
	c := startCluster(t, 2)
	broker := c.startKafka(2, "totals")
	tms := append([]*process(nil), c.procs[1:3]...)
	script := fmt.Sprintf(`CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP) WITH (connector = 'sequence', count = '%d', keys = '%d', rate = '2000');
CREATE SINK totals AS SELECT k, count(*) AS n, sum(v) AS total FROM s GROUP BY k HAVING count(*) %% 7 <> 3
WITH (connector = 'kafka', properties.bootstrap.server = '%s', topic = 'totals', transactional_id_prefix = 'e2e-upsert')
FORMAT UPSERT ENCODE JSON;`, count, keys, broker)
	out, err := c.weir("sql", "-p", "2", "--checkpoint-interval", "300ms", "-e", script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	id := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "totals:"))
	if kills := c.killTaskManagers(id, tms, 1); kills != 1 {
		t.Fatalf("the job ended before a TaskManager was killed: make it longer")
	}
	if job := c.waitJob(id, 3*time.Minute); job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}

	// The batch result: every key's count and sum (v = i for i in [0,
	// count), k = i mod keys).
	want := map[string]string{}
	for k := 0; k < keys; k++ {
		n := count / keys
		sum := int64(n*k) + int64(keys)*int64(n*(n-1)/2)
		want[fmt.Sprintf(`{"k":%d}`, k)] = fmt.Sprintf(`{"k":%d,"n":%d,"total":%d}`, k, n, sum)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, err := kafkatest.ReadCommitted(ctx, "totals", kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	latest, tombstones := map[string]string{}, 0
	for _, r := range recs {
		if r.Value == nil {
			tombstones++
			delete(latest, string(r.Key))
			continue
		}
		var v map[string]any
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("value %q of key %q: %v", r.Value, r.Key, err)
		}
		latest[string(r.Key)] = string(r.Value)
	}
	if tombstones == 0 {
		t.Error("no tombstone: the HAVING's deletions were not written")
	}
	if err := sameMap(latest, want); err != nil {
		t.Fatalf("the topic folded by key (%d records, %d tombstones): %v", len(recs), tombstones, err)
	}
	t.Logf("%d records (%d tombstones) fold to the batch result of %d keys", len(recs), tombstones, len(want))

	// Read back as an upsert source, aggregated again.
	dir := filepath.Join(c.dir, "again")
	script = fmt.Sprintf(`CREATE SOURCE totals (k BIGINT, n BIGINT, total BIGINT, PRIMARY KEY (k) NOT ENFORCED)
WITH (connector = 'kafka', properties.bootstrap.server = '%s', topic = 'totals', bounded = 'latest') FORMAT UPSERT ENCODE JSON;
CREATE SINK again AS SELECT n, count(*) AS keys, sum(total) AS total FROM totals GROUP BY n
WITH (connector = 'file', path = '%s', type = 'debezium');`, broker, dir)
	if out, err = c.weir("sql", "-p", "2", "--checkpoint-interval", "300ms", "-e", script); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	id = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "again:"))
	if job := c.waitJob(id, 2*time.Minute); job.State != "FINISHED" {
		t.Fatalf("the upsert source's job ended %s: %s", job.State, job.FailureCause)
	}
	lines := readChangelog(t, dir)
	st, err := changelog.Replay(lines, []string{"n"})
	if err != nil {
		t.Fatalf("the changelog of %d changes does not replay: %v", len(lines), err)
	}
	var total int64
	for k := 0; k < keys; k++ {
		n := count / keys
		total += int64(n*k) + int64(keys)*int64(n*(n-1)/2)
	}
	if got, w := st.Rows(nil), []string{fmt.Sprintf("%d,%d,%d", count/keys, keys, total)}; strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Fatalf("the upsert source aggregated again: %v, want %v", got, w)
	}
	t.Logf("read back as an upsert source: %d changes replay to the batch result", len(lines))
}

func sameMap(got, want map[string]string) error {
	for k, w := range want {
		if g, ok := got[k]; !ok {
			return fmt.Errorf("key %s missing (want %s)", k, w)
		} else if g != w {
			return fmt.Errorf("key %s: %s, want %s", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("key %s is not in the result (value %s)", k, g)
		}
	}
	return nil
}
