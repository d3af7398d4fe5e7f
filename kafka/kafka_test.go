package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/internal/scheduler"
	"github.com/weirproject/weir/internal/testcluster"
	"github.com/weirproject/weir/kafka"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

type purchase struct {
	ID     int64
	Amount int64
}

// TestKafkaTyped: a Go job reads a topic a plain producer wrote, as
// typed values (kafka.Source), transforms them and writes them to another
// topic exactly once (kafka.Sink); a read_committed reader finds every
// record once, with its header carried through.
func TestKafkaTyped(t *testing.T) {
	const n = 4000
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders", "doubled"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	broker := cluster.ListenAddrs()[0]
	prod, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range int64(n) {
		recs = append(recs, &kgo.Record{Key: []byte(strconv.FormatInt(i%16, 10)), Value: []byte(fmt.Sprintf("%d:%d", i, i*10)),
			Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("test")}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	job := weir.NewJob("kafka-typed", weir.Checkpointing(200*time.Millisecond))
	in := weir.FromSource(job, "orders", kafka.Source(kafka.SourceConfig{
		Connection: kafka.Connection{Brokers: []string{broker}}, Topic: "orders", Bounded: true,
	}, func(r kafka.Record) (purchase, error) {
		if len(r.Headers) != 1 || r.Headers[0].Key != "origin" {
			return purchase{}, fmt.Errorf("headers %v", r.Headers)
		}
		id, amount, ok := strings.Cut(string(r.Value), ":")
		if !ok {
			return purchase{}, fmt.Errorf("value %q", r.Value)
		}
		// Each subtask decodes at once: nothing shared is written here.
		o := purchase{}
		o.ID, _ = strconv.ParseInt(id, 10, 64)
		var perr error
		o.Amount, perr = strconv.ParseInt(amount, 10, 64)
		return o, perr
	}), weir.Parallelism(2))
	doubled := weir.Map(in, "double", func(o purchase) purchase { o.Amount *= 2; return o })
	weir.SinkTo(doubled, "doubled", kafka.Sink(kafka.SinkConfig{
		Connection: kafka.Connection{Brokers: []string{broker}}, Topic: "doubled",
		TransactionalIDPrefix: "kafka-typed", TransactionTimeout: 15 * time.Minute,
	}, func(o purchase) kafka.Record {
		return kafka.Record{Key: []byte(strconv.FormatInt(o.ID, 10)), Value: []byte(strconv.FormatInt(o.Amount, 10)),
			Headers: []sdk.Header{{Key: "stage", Value: []byte("doubled")}}}
	}))
	runJob(t, job)

	cons, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("doubled"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int64]int64{}
	dups := 0
	for len(got) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			id, _ := strconv.ParseInt(string(r.Key), 10, 64)
			v, _ := strconv.ParseInt(string(r.Value), 10, 64)
			if _, dup := got[id]; dup {
				dups++
			}
			if len(r.Headers) != 1 || string(r.Headers[0].Value) != "doubled" {
				t.Errorf("record %d: headers %v", id, r.Headers)
			}
			got[id] = v
		})
	}
	if len(got) != n || dups != 0 {
		t.Fatalf("read %d distinct records (%d duplicates), want %d once", len(got), dups, n)
	}
	for id, v := range got {
		if v != id*20 {
			t.Fatalf("record %d = %d, want %d", id, v, id*20)
		}
	}
}

// TestKafkaTypedValidated: a typed Kafka sink is checked like the
// built-in one when the job is built.
func TestKafkaTypedValidated(t *testing.T) {
	job := weir.NewJob("kafka-invalid", weir.Checkpointing(time.Second))
	in := weir.FromSource(job, "in", weir.Generate(10, func(i int64) int64 { return i }))
	weir.SinkTo(in, "out", kafka.Sink(kafka.SinkConfig{Connection: kafka.Connection{Brokers: []string{"k:9092"}}, Topic: "t"},
		func(v int64) kafka.Record { return kafka.Record{} }))
	_, err := job.Graph()
	if err == nil || !slices.ContainsFunc([]string{`transactional-id-prefix`}, func(s string) bool { return strings.Contains(err.Error(), s) }) {
		t.Fatalf("Graph() = %v, want the missing transactional-id-prefix refused", err)
	}
}

// runJob runs j on an in-process cluster of its own (a JobManager and two
// TaskManagers with j's operators) to the end, which must be FINISHED.
func runJob(t *testing.T, j *weir.Job) {
	t.Helper()
	tc := testcluster.Start(t, testcluster.Options{})
	for i := range 2 {
		tc.StartTaskManager(fmt.Sprintf("tm-%d", i), 2, j.Registry())
	}
	g, err := j.Graph()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tc.Client.SubmitJob(context.Background(), &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		t.Fatal(err)
	}
	var info *weirv1.JobInfo
	poll.Until(t, 2*time.Minute, 20*time.Millisecond, "job "+resp.GetJobId(), func() (bool, string) {
		r, err := tc.Client.GetJob(context.Background(), &weirv1.GetJobRequest{JobId: resp.GetJobId()})
		if err != nil {
			return false, err.Error()
		}
		info = r.GetJob()
		return scheduler.GloballyTerminal(info.GetState()), info.GetState().String()
	})
	if info.GetState() != weirv1.JobState_JOB_STATE_FINISHED {
		t.Fatalf("job ended %s: %s", info.GetState(), info.GetFailureCause())
	}
}
