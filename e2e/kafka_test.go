package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/kafka/kafkatest"
)

// startKafka runs the Kafka-protocol development broker (cmd/kafka-dev)
// as a process of the cluster, with topics ("out" when none is named) of
// partitions partitions, and returns its address.
func (c *cluster) startKafka(partitions int, topics ...string) string {
	c.t.Helper()
	if len(topics) == 0 {
		topics = []string{"out"}
	}
	addr := freePort(c.t)
	c.start("kafka-dev", "--listen", addr, "--data-dir", filepath.Join(c.dir, "kafka"),
		"--topics", strings.Join(topics, ","), "--partitions", strconv.Itoa(partitions))
	c.waitFor(30*time.Second, "the Kafka broker listening", func() (bool, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	return addr
}

// writeKafkaSpec is the running-sum job writing its sums to Kafka's "out"
// with delivery.
func writeKafkaSpec(t *testing.T, dir, broker string, count, keys, rate int, delivery string) string {
	t.Helper()
	spec := fmt.Sprintf(`name: running-sum-to-kafka
checkpointing: {interval: 200ms, mode: exactly-once, timeout: 1m, retained: 1}
restart-strategy: {type: fixed-delay, attempts: 1000, delay: 100ms}
vertices:
  - {name: source, operator: sequence-source, parallelism: 2, config: {count: %d, keys: %d, rate: %d}}
  - {name: sum, operator: keyed-sum, parallelism: 2, inputs: [{from: source, partition: hash}]}
  - name: sink
    operator: kafka-sink
    parallelism: 2
    inputs: [{from: sum, partition: forward}]
    config: {bootstrap-servers: %q, topic: out, delivery: %s, transactional-id-prefix: e2e, transaction-timeout: 5m}
`, count, keys, rate, broker, delivery)
	path := filepath.Join(dir, "kafka-job.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// written is how many records (committed or not, with transaction
// markers) topic's partitions hold: a cheap sign that a sink wrote.
func written(t *testing.T, broker, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += max(o.Offset, 0) })
	return n
}

// readCommitted reads topic out to its end with read_committed, as
// "key,value" lines: what a downstream consumer sees.
func readCommitted(t *testing.T, broker string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, err := kafkatest.ReadCommitted(ctx, "out", kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(recs))
	for i, r := range recs {
		lines[i] = string(r.Key) + "," + string(r.Value)
	}
	return lines
}

// kafkaKill runs the running-sum job into Kafka with delivery while
// faults (point → terms, on every TaskManager) crash TaskManagers, and
// returns the checker's verdict on what a read_committed consumer reads.
func kafkaKill(t *testing.T, delivery string, faults map[string]string) error {
	const count, keys, rate = 24000, 16, 2000
	c := startCluster(t, 3)
	broker := c.startKafka(3)
	tms := append([]*process(nil), c.procs[1:4]...) // the JobManager is procs[0], the broker procs[4]
	for _, p := range tms {
		for point, terms := range faults {
			c.setFault(p, point, terms)
		}
	}
	id := c.submit(writeKafkaSpec(t, c.dir, broker, count, keys, rate, delivery))
	job, replaced := c.superviseTaskManagers(id, tms, 3*time.Minute)
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if replaced == 0 {
		t.Fatal("no TaskManager crashed: the faults did not happen")
	}
	lines := readCommitted(t, broker)
	t.Logf("%s: %d TaskManagers crashed; %d records read from Kafka", delivery, replaced, len(lines))
	return check.RunningSum(lines, count, keys)
}

// The Kafka sink's commit window, killed at each step on real processes:
// the topic read with read_committed holds every record exactly once.
func TestKafkaSinkKills(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		point string
	}{
		// (a) after the sinks pre-committed (flushed their transactions)
		// and before the checkpoint completed: the job restores the
		// checkpoint before, the transactions are aborted.
		{"after pre-commit, before completion", "taskBeforeAck"},
		// (b) after the checkpoint completed, before the sink committed:
		// the restore commits what the checkpoint pre-committed.
		{"after completion, before the commit", "sinkBeforeCommit"},
		// (c) in the middle of the commits: one transaction committed,
		// the rest not.
		{"in the middle of the commits", "sinkMidCommit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := kafkaKill(t, "exactly-once", map[string]string{tc.point: `1*return("crash")`}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The counter-proof: at-least-once delivery under the same kill writes
// records twice, and the checker says so. The kill comes at a TaskManager's
// third checkpoint (each of its two subtasks passes the point once per
// checkpoint), so that checkpoints have completed and the sink has written
// records past the one the job restores: a kill at the first checkpoint can
// land before any record was written, and then there is nothing to repeat.
func TestKafkaSinkAtLeastOnceDuplicates(t *testing.T) {
	t.Parallel()
	err := kafkaKill(t, "at-least-once", map[string]string{"taskBeforeAck": `4*off->1*return("crash")`})
	if err == nil {
		t.Fatal("at-least-once delivery through a crash passed the checker: the counter-proof did not happen")
	}
	if !strings.Contains(err.Error(), "duplicated") && !strings.Contains(err.Error(), "step") {
		t.Fatalf("the checker failed, but not on duplicates: %v", err)
	}
	t.Logf("as expected, the checker rejects it: %v", err)
}

// (d) The leading JobManager (HA on etcd) dies after a checkpoint is in
// the store and before it notified anyone: the new leader restores that
// checkpoint, whose pre-committed transactions the restored sinks commit.
func TestKafkaSinkLeaderKill(t *testing.T) {
	t.Parallel()
	const count, keys, rate = 24000, 16, 2000
	h := startHACluster(t, 2, 2)
	broker := h.startKafka(3)
	addr, leader := h.leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	h.setFault(leader, "jmAfterStoreBeforeNotify", `2*off->1*return("crash")`)
	id := h.submit(writeKafkaSpec(t, h.dir, broker, count, keys, rate, "exactly-once"))
	var job jobJSON
	h.waitFor(3*time.Minute, "job "+id+" to end", func() (bool, error) {
		if err := h.weirJSON(&job, "job", "get", id); err != nil {
			return false, nil // no leader until the standby takes over
		}
		return job.State == "FINISHED" || job.State == "FAILED" || job.State == "CANCELED", nil
	})
	if job.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", job.State, job.FailureCause)
	}
	if !exited(leader) {
		t.Fatalf("the leader %s did not crash at the fault point", addr)
	}
	leader.Ended() // by its fault point, as meant
	lines := readCommitted(t, broker)
	if err := check.RunningSum(lines, count, keys); err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s crashed after a store add; %d records read from Kafka exactly once", addr, len(lines))
}

// produce writes records i in [0, n) to topic with key i mod keys and
// value i, with a plain franz-go producer, as any application would.
func produce(t *testing.T, broker, topic string, n, keys int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	errs := make(chan error, 1)
	for i := range n {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i % keys)), Value: []byte(strconv.Itoa(i))}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// A job reads a topic a plain producer filled (8 partitions), writes
// running sums to another, is stopped with a savepoint in the middle and
// resumed at twice the parallelism: the output topic holds every sum
// exactly once.
func TestKafkaRescaleFromSavepoint(t *testing.T) {
	t.Parallel()
	records := 1_000_000
	if testing.Short() {
		records = 100_000
	}
	const keys = 64
	c := startCluster(t, 4)
	addr := c.startKafka(8, "in", "out")
	produce(t, addr, "in", records, keys)
	spec := func(p int) string {
		s := fmt.Sprintf(`name: kafka-rescale
checkpointing: {interval: 200ms, timeout: 1m}
restart-strategy: {type: fixed-delay, attempts: 100, delay: 100ms}
vertices:
  - {name: source, operator: kafka-source, parallelism: %d, config: {bootstrap-servers: %q, topic: in, bounded: latest}}
  - {name: sum, operator: keyed-sum, parallelism: %d, inputs: [{from: source, partition: hash}]}
  - {name: sink, operator: kafka-sink, parallelism: %d, inputs: [{from: sum, partition: forward}],
     config: {bootstrap-servers: %q, topic: out, transactional-id-prefix: rescale, transaction-timeout: 5m}}
`, p, addr, p, p, addr)
		path := filepath.Join(c.dir, fmt.Sprintf("rescale-%d.yaml", p))
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Stopped once some sums are committed: on a loaded machine the
	// sources may take longer to start than two 200 ms checkpoints.
	savepoint := c.runThenStopWhen(spec(2), "some sums written", func(id string) (bool, error) {
		n, err := c.checkpointsCompleted(id)
		return err == nil && n >= 2 && written(t, addr, "out") > 0, err
	})
	if before := len(readCommitted(t, addr)); before == 0 || before >= records {
		t.Fatalf("%d sums committed at the stop; want some but not all of %d", before, records)
	} else {
		t.Logf("stopped with a savepoint after %d sums", before)
	}
	second := c.submit(spec(4), "--from", savepoint)
	if job := c.waitJob(second, 3*time.Minute); job.State != "FINISHED" {
		t.Fatalf("resumed job ended %s: %s", job.State, job.FailureCause)
	}
	lines := readCommitted(t, addr)
	if err := check.RunningSum(lines, int64(records), keys); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records from 8 partitions, stopped at p=2 and resumed at p=4: %d sums exactly once", records, len(lines))
}
