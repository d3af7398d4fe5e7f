package kafka

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weirproject/weir/internal/kafka/kafkatest"
	"github.com/weirproject/weir/internal/poll"
	"github.com/weirproject/weir/sdk"
)

// sinkBroker is an in-process kfake cluster with the topic "out".
func sinkBroker(t *testing.T) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// sinkCtx is the sdk.Context of one kafka-sink subtask, with operator
// state in memory: what it stores is what a checkpoint would.
type sinkCtx struct {
	sdk.Context // nil: only what the sink calls is implemented
	cfg         sdk.Config
	subtask     int
	parallelism int
	restoredID  int64
	lists       map[string]*memList
}

type memList struct{ items [][]byte }

func (l *memList) Get() [][]byte               { return l.items }
func (l *memList) Update(items [][]byte)       { l.items = append([][]byte(nil), items...) }
func (l *memList) Add(b []byte)                { l.items = append(l.items, b) }
func (l *memList) Clear()                      { l.items = nil }
func (c *sinkCtx) Config() sdk.Config          { return c.cfg }
func (c *sinkCtx) TaskName() string            { return "sink" }
func (c *sinkCtx) SubtaskIndex() int           { return c.subtask }
func (c *sinkCtx) Parallelism() int            { return c.parallelism }
func (c *sinkCtx) RestoredCheckpointID() int64 { return c.restoredID }
func (c *sinkCtx) Logger() *slog.Logger        { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (c *sinkCtx) UnionListState(name string) sdk.ListState {
	if c.lists[name] == nil {
		c.lists[name] = &memList{}
	}
	return c.lists[name]
}

// sinkSubtask opens a sink subtask; restored is the union of the items
// every subtask of the restored checkpoint stored.
func sinkSubtask(t *testing.T, cfg sdk.Config, subtask, parallelism int, restored [][]byte) (*Sink, *sinkCtx, error) {
	t.Helper()
	ctx := &sinkCtx{cfg: cfg, subtask: subtask, parallelism: parallelism, lists: map[string]*memList{}}
	if len(restored) > 0 {
		ctx.restoredID = 1 // the tests restore their checkpoint 1 (or the start)
	}
	ctx.lists["kafka-sink-transactions"] = &memList{items: restored}
	s := &Sink{}
	err := s.Open(ctx)
	return s, ctx, err
}

func (c *sinkCtx) checkpoint() [][]byte { return c.lists["kafka-sink-transactions"].Get() }

func write(t *testing.T, s *Sink, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := s.ProcessRecord(sdk.Record{Key: []byte("k"), Value: []byte(v), Timestamp: 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// committed reads topic "out" with read_committed to its end.
func committed(t *testing.T, addr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := kafkatest.ReadCommitted(ctx, "out", kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	slices.Sort(out)
	return out
}

func eoConfig(addr string) sdk.Config {
	return sdk.Config{"bootstrap-servers": addr, "topic": "out", "transactional-id-prefix": "job1", "transaction-timeout": "1m"}
}

// openSink opens a sink subtask that must open, closed with the test.
func openSink(t *testing.T, cfg sdk.Config, subtask, parallelism int, restored [][]byte) (*Sink, *sinkCtx) {
	t.Helper()
	s, ctx, err := sinkSubtask(t, cfg, subtask, parallelism, restored)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ctx
}

func TestSinkCommitsOnCheckpointCompletion(t *testing.T) {
	_, addr := sinkBroker(t)
	s, _ := openSink(t, eoConfig(addr), 0, 1, nil)
	write(t, s, "a", "b")
	if err := s.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	write(t, s, "c")
	if got := committed(t, addr); len(got) != 0 {
		t.Fatalf("visible before the checkpoint completed: %v", got)
	}
	if err := s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, addr); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("committed %v, want a b (c is in the next checkpoint's transaction)", got)
	}
	if err := s.SnapshotState(2); err != nil {
		t.Fatal(err)
	}
	if err := s.NotifyCheckpointComplete(2); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, addr); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("committed %v", got)
	}
}

// The crash cases: the restored checkpoint's transaction is committed
// exactly once whatever the failed attempt did after its snapshot, and
// what it wrote after is aborted.
func TestSinkRecovery(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after runs on the failed attempt after checkpoint 1's snapshot.
		after func(t *testing.T, s *Sink)
	}{
		{"crash after pre-commit, before the checkpoint completed", func(t *testing.T, s *Sink) {}},
		{"crash after the checkpoint completed, before the commit", func(t *testing.T, s *Sink) {}},
		{"crash after the commit", func(t *testing.T, s *Sink) {
			if err := s.NotifyCheckpointComplete(1); err != nil {
				t.Fatal(err)
			}
		}},
		{"crash with the next transaction open", func(t *testing.T, s *Sink) {
			write(t, s, "lost-1", "lost-2")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.cur.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := sinkBroker(t)
			s, ctx, err := sinkSubtask(t, eoConfig(addr), 0, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			write(t, s, "a", "b")
			if err := s.SnapshotState(1); err != nil {
				t.Fatal(err)
			}
			state := ctx.checkpoint()
			tc.after(t, s)
			// The crash: the process is gone, its transactions as they are.
			for _, c := range s.producers {
				c.Close()
			}
			s.admin.Close()

			r, _ := openSink(t, eoConfig(addr), 0, 1, state)
			write(t, r, "c")
			if err := r.SnapshotState(2); err != nil {
				t.Fatal(err)
			}
			if err := r.NotifyCheckpointComplete(2); err != nil {
				t.Fatal(err)
			}
			if got := committed(t, addr); !slices.Equal(got, []string{"a", "b", "c"}) {
				describeOut(t, addr)
				t.Fatalf("committed %v, want a b c once each", got)
			}
		})
	}
}

// describeOut logs what the broker holds of topic "out" and its
// transactions, for a test that found the output wrong.
func describeOut(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Log(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "out")
	t.Logf("end offsets %v (%v)", ends, err)
	stable, err := adm.ListCommittedOffsets(ctx, "out")
	t.Logf("last stable offsets %v (%v)", stable, err)
	txns, err := adm.ListTransactions(ctx, nil, nil)
	t.Logf("transactions %+v (%v)", txns, err)
}

// Scaled down from 2 subtasks to 1: the remaining one commits both
// subtasks' pre-committed transactions and aborts what the gone one left
// open.
func TestSinkRecoveryRescaled(t *testing.T) {
	_, addr := sinkBroker(t)
	var state [][]byte
	var olds []*Sink
	for i := range 2 {
		s, ctx, err := sinkSubtask(t, eoConfig(addr), i, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		write(t, s, fmt.Sprintf("s%d-a", i))
		if err := s.SnapshotState(1); err != nil {
			t.Fatal(err)
		}
		state = append(state, ctx.checkpoint()...)
		write(t, s, fmt.Sprintf("s%d-lost", i))
		ctx2, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.cur.Flush(ctx2); err != nil {
			t.Fatal(err)
		}
		cancel()
		olds = append(olds, s)
	}
	for _, s := range olds {
		for _, c := range s.producers {
			c.Close()
		}
		s.admin.Close()
	}
	openSink(t, eoConfig(addr), 0, 1, state)
	if got := committed(t, addr); !slices.Equal(got, []string{"s0-a", "s1-a"}) {
		t.Fatalf("committed %v, want both subtasks' checkpoint-1 records and nothing else", got)
	}
}

// A commit the broker refuses (a fault it injects on EndTxn) fails the
// subtask; the restore commits the transaction.
func TestSinkCommitFailureThenRestore(t *testing.T) {
	cluster, addr := sinkBroker(t)
	s, ctx, err := sinkSubtask(t, eoConfig(addr), 0, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(t, s, "a")
	if err := s.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if failed.Swap(true) {
			return nil, nil, false
		}
		resp := req.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.TransactionAbortable.Code
		return resp, nil, true
	})
	if err := s.NotifyCheckpointComplete(1); err == nil {
		t.Fatal("a refused commit did not fail the notification")
	}
	for _, c := range s.producers {
		c.Close()
	}
	s.admin.Close()
	openSink(t, eoConfig(addr), 0, 1, ctx.checkpoint())
	if got := committed(t, addr); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("committed %v, want a", got)
	}
}

func TestSinkAtLeastOnce(t *testing.T) {
	_, addr := sinkBroker(t)
	cfg := sdk.Config{"bootstrap-servers": addr, "topic": "out", "delivery": "at-least-once"}
	s, _ := openSink(t, cfg, 0, 1, nil)
	write(t, s, "a", "b")
	if err := s.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, addr); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the snapshot's flush: %v", got)
	}
}

func TestSinkConfigErrors(t *testing.T) {
	_, addr := sinkBroker(t)
	for _, tc := range []struct {
		cfg  sdk.Config
		want string
	}{
		{sdk.Config{"bootstrap-servers": addr}, `"topic": required`},
		{sdk.Config{"bootstrap-servers": addr, "topic": "out"}, `"transactional-id-prefix": required for delivery exactly-once`},
		{sdk.Config{"bootstrap-servers": addr, "topic": "out", "delivery": "maybe"}, `unknown delivery "maybe"`},
		{sdk.Config{"topic": "out", "delivery": "none"}, `"bootstrap-servers": required`},
		{sdk.Config{"bootstrap-servers": addr, "topic": "missing", "delivery": "none"}, `topic "missing" does not exist`},
	} {
		_, _, err := sinkSubtask(t, tc.cfg, 0, 1, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%v) = %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	// Unreachable brokers fail in bounded time, naming the problem.
	start := time.Now()
	_, _, err := sinkSubtask(t, sdk.Config{"bootstrap-servers": "127.0.0.1:1", "topic": "out", "delivery": "none"}, 0, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "brokers unreachable") || time.Since(start) > 30*time.Second {
		t.Errorf("unreachable brokers: %v after %v", err, time.Since(start))
	}
}

// Crash after the pre-commit of a checkpoint that then never completed:
// the job restores the checkpoint before it, and the pre-committed
// transaction is aborted (its records are written again by the replay).
func TestSinkRecoveryFromEarlierCheckpoint(t *testing.T) {
	_, addr := sinkBroker(t)
	s, ctx, err := sinkSubtask(t, eoConfig(addr), 0, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	earlier := ctx.checkpoint() // what checkpoint 0 (the start) holds
	write(t, s, "replayed")
	if err := s.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	for _, c := range s.producers {
		c.Close()
	}
	s.admin.Close()
	r, _ := openSink(t, eoConfig(addr), 0, 1, earlier)
	write(t, r, "replayed")
	if err := r.SnapshotState(2); err != nil {
		t.Fatal(err)
	}
	if err := r.NotifyCheckpointComplete(2); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, addr); !slices.Equal(got, []string{"replayed"}) {
		t.Fatalf("committed %v, want the replayed record once", got)
	}
}

// TestSinkInjectedWriteErrors: the broker refuses a write inside a
// transaction, once, on produce or on adding the partition to the
// transaction (which a client sends only to brokers before Kafka 4's
// transactions version 2: the case runs against one speaking Kafka 3.9's
// protocol). The sink fails at its next record or checkpoint (never
// pre-committing a transaction that misses records), and the subtask
// restored from the last completed checkpoint writes everything after
// it again: the topic read read_committed holds each record once.
func TestSinkInjectedWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broker *kversion.Versions
		key    kmsg.Key
		refuse func(kmsg.Request) kmsg.Response
	}{
		{"produce", nil, kmsg.Produce, func(req kmsg.Request) kmsg.Response {
			return refuseProduce(req.(*kmsg.ProduceRequest))
		}},
		{"add partitions to transaction", kversion.V3_9_0(), kmsg.AddPartitionsToTxn, func(req kmsg.Request) kmsg.Response {
			r := req.(*kmsg.AddPartitionsToTxnRequest)
			resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			for _, rt := range r.Topics {
				st := kmsg.NewAddPartitionsToTxnResponseTopic()
				st.Topic = rt.Topic
				for _, p := range rt.Partitions {
					sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					sp.Partition, sp.ErrorCode = p, kerr.TopicAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kfake.Opt{kfake.SeedTopics(3, "out")}
			if tc.broker != nil {
				opts = append(opts, kfake.MaxVersions(tc.broker))
			}
			addr, cluster := newBroker(t, opts...)
			s, ctx := openSink(t, eoConfig(addr), 0, 1, nil)
			write(t, s, "a")
			if err := s.SnapshotState(1); err != nil {
				t.Fatal(err)
			}
			if err := s.NotifyCheckpointComplete(1); err != nil {
				t.Fatal(err)
			}
			restored := ctx.checkpoint()

			var fired atomic.Bool
			cluster.ControlKey(int16(tc.key), func(req kmsg.Request) (kmsg.Response, error, bool) {
				if fired.Swap(true) {
					return nil, nil, false
				}
				return tc.refuse(req), nil, true
			})
			err := s.ProcessRecord(sdk.Record{Value: []byte("b")}, nil)
			if err == nil {
				err = s.SnapshotState(2)
			}
			if !fired.Load() {
				t.Fatalf("the broker was never asked for %s", tc.name)
			}
			if err == nil {
				t.Fatal("a refused write pre-committed checkpoint 2")
			}
			t.Logf("the sink failed: %v", err)
			s.Close()

			s2, _ := openSink(t, eoConfig(addr), 0, 1, restored)
			write(t, s2, "b")
			if err := s2.SnapshotState(2); err != nil {
				t.Fatal(err)
			}
			if err := s2.NotifyCheckpointComplete(2); err != nil {
				t.Fatal(err)
			}
			if got := committed(t, addr); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("committed %v, want a and b once", got)
			}
		})
	}
}

// TestSinkHeadersAndTopicHeader: headers are written; with topic-header,
// the header names the record's topic and is not written itself.
func TestSinkHeadersAndTopicHeader(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(1, "out", "alerts"))
	cfg := eoConfig(addr)
	cfg["topic-header"] = "route"
	s, _ := openSink(t, cfg, 0, 1, nil)
	for _, r := range []sdk.Record{
		{Value: []byte("plain"), Headers: []sdk.Header{{Key: "trace", Value: []byte("t1")}}},
		{Value: []byte("routed"), Headers: []sdk.Header{{Key: "trace", Value: []byte("t2")}, {Key: "route", Value: []byte("alerts")}}},
	} {
		if err := s.ProcessRecord(r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	if err := s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("out", "alerts"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v, want two records", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			got[r.Topic+"/"+string(r.Value)] = strings.Join(hs, ",")
		})
	}
	want := map[string]string{"out/plain": "trace=t1", "alerts/routed": "trace=t2"}
	if !maps.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// TestSinkCommitWaitsForTheClientsPartitions: a commit is held back until
// the Kafka client shows the partitions of every topic the transaction
// wrote to. franz-go stores a new topic's partitions, where its
// EndTransaction looks for what a transaction added, only after it has
// handed the waiting records to them; a commit in between silently skips
// the EndTxn or aborts (see awaitLoaded). The test holds the client's view
// back, as a descheduled metadata goroutine does under load.
func TestSinkCommitWaitsForTheClientsPartitions(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(3, "out", "alerts"))
	cfg := eoConfig(addr)
	cfg["topic-header"] = "route"
	s, _ := openSink(t, cfg, 0, 1, nil)
	release := make(chan struct{})
	asked := make(chan string, 100)
	s.loaded = func(cl *kgo.Client, topic string) bool {
		select {
		case <-release:
			return partitionsLoaded(cl, topic)
		default:
			asked <- topic
			return false
		}
	}
	write(t, s, "a")
	if err := s.ProcessRecord(sdk.Record{Value: []byte("b"), Headers: []sdk.Header{{Key: "route", Value: []byte("alerts")}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	ends := s.ends[0].Load()
	done := make(chan error, 1)
	go func() { done <- s.NotifyCheckpointComplete(1) }()
	select {
	case topic := <-asked:
		if topic != "out" {
			t.Fatalf("the commit first waited for topic %s, want out", topic)
		}
	case err := <-done:
		t.Fatalf("the commit did not wait for the client's partitions (err %v)", err)
	case <-time.After(time.Minute):
		t.Fatal("the commit neither waited nor returned")
	}
	if n := s.ends[0].Load(); n != ends {
		t.Fatalf("%d EndTxn sent while the client did not show the partitions", n-ends)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the commit did not finish once the partitions showed")
	}
	if n := s.ends[0].Load(); n != ends+1 {
		t.Fatalf("%d EndTxn sent, want 1", n-ends)
	}
	if got := committed(t, addr); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("committed to out %v, want a", got)
	}
}

// TestPartitionsLoadedWaitsOutAnUnknownTopic: a topic the client first
// found missing (a retriable load error, no partitions) is not loaded: the
// lookup that finds it hands out the waiting records before it stores the
// partitions, the race the commit waits out.
func TestPartitionsLoadedWaitsOutAnUnknownTopic(t *testing.T) {
	addr, _ := newBroker(t, kfake.SeedTopics(1, "out"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordRetries(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.Produce(context.Background(), &kgo.Record{Topic: "late", Value: []byte("x")}, nil)
	poll.Until(t, time.Minute, 5*time.Millisecond, "the client's first lookup of topic late", func() (bool, string) {
		_, _, err := cl.PartitionLeader("late", 0)
		return err != nil, fmt.Sprint(err)
	})
	if partitionsLoaded(cl, "late") {
		t.Fatal("a topic whose lookup failed with a retriable error counts as loaded")
	}
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, "late"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, 5*time.Millisecond, "topic late loaded", func() (bool, string) {
		return partitionsLoaded(cl, "late"), "not loaded"
	})
}

// TestSinkTombstones: with tombstones, a record with an empty value (as
// one arrives from the network: an empty slice, not nil) is written with
// a null value; without, it stays an empty value.
func TestSinkTombstones(t *testing.T) {
	for _, tomb := range []bool{true, false} {
		addr, _ := newBroker(t, kfake.SeedTopics(1, "out"))
		cfg := eoConfig(addr)
		if tomb {
			cfg["tombstones"] = true
		}
		s, _ := openSink(t, cfg, 0, 1, nil)
		for _, r := range []sdk.Record{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("k"), Value: []byte{}}} {
			if err := s.ProcessRecord(r, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SnapshotState(1); err != nil {
			t.Fatal(err)
		}
		if err := s.NotifyCheckpointComplete(1); err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		var got []*kgo.Record
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		for len(got) < 2 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d records, want two", len(got))
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
		}
		cancel()
		cl.Close()
		if string(got[0].Value) != "v" || (got[1].Value == nil) != tomb {
			t.Fatalf("tombstones %v: values %q and %q (nil: %v)", tomb, got[0].Value, got[1].Value, got[1].Value == nil)
		}
	}
}
