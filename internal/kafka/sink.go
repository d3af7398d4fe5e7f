package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/kafka/kafkacfg"
	"github.com/weirproject/weir/internal/kafka/sinktxn"
	"github.com/weirproject/weir/sdk"
)

// The sink's configuration is parsed in kafkacfg, which the job graph's
// validation uses too (without linking a Kafka client).
type (
	SinkConfig = kafkacfg.SinkConfig
	Delivery   = kafkacfg.Delivery
)

const (
	ExactlyOnce = kafkacfg.ExactlyOnce
	AtLeastOnce = kafkacfg.AtLeastOnce
	None        = kafkacfg.None
)

// Sink is kafka-sink: the record's key, value, timestamp and headers to
// topic, with the delivery guarantee configured. With topic-header set,
// a record carrying that header goes to the topic its value names (the
// header itself is not written).
//
// Exactly once is Flink's two-phase commit, its transactions kept by the
// state machine in sinktxn (whose package comment is the protocol): the
// sink writes records into the transaction of one of its transactional
// IDs, flushes (pre-commits) it at a checkpoint's snapshot and stores it,
// with its producer ID and epoch, in the checkpoint; it commits when the
// checkpoint completes. A restored subtask commits what its checkpoint
// pre-committed, resuming each transaction with the stored producer ID and
// epoch (a commit the broker already applied is success, any number of
// times, because the machine never reinitialises an ID a restorable
// checkpoint names), then fences the other IDs of its own and of the
// subtasks it answers for, and every open transaction the brokers list
// under them: whatever earlier attempts left open is aborted.
type Sink struct {
	cfg     SinkConfig
	servers string // for messages
	opts    []kgo.Opt
	subtask int
	log     *slog.Logger
	state   sdk.ListState
	admin   *kgo.Client
	plain   *kgo.Client

	m         *sinktxn.Machine
	names     sinktxn.Names
	producers map[int]*kgo.Client // by slot
	cur       *kgo.Client         // the open transaction's producer, nil when none
	// curWrites is what the open transaction wrote; written holds it for
	// each pre-committed transaction by slot, and ends the EndTxn requests
	// each slot's producer sent (see NotifyCheckpointComplete).
	curWrites writes
	written   map[int]writes
	ends      map[int]*atomic.Int64
	// loaded says whether cl's producer shows topic's partitions; a test
	// replaces it to hold a commit back.
	loaded func(cl *kgo.Client, topic string) bool
	// now is the machine's clock; nil is the wall clock, with a timer
	// that marks when the oldest uncommitted transaction reaches its
	// maximum age (a test's clock is checked at every call instead).
	now     func() time.Time
	timer   *time.Timer
	overdue atomic.Bool

	mu      sync.Mutex
	sendErr error
}

func (s *Sink) Open(ctx sdk.Context) error {
	cfg, err := kafkacfg.ParseSinkConfig(ctx.Config())
	if err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	opts, err := clientOptions(ctx.Config(), ctx.Logger())
	if err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	s.cfg, s.opts = cfg, opts
	s.servers, _ = ctx.Config().String("bootstrap-servers", "")
	s.subtask, s.log = ctx.SubtaskIndex(), ctx.Logger()
	if s.admin, err = kgo.NewClient(opts...); err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	if err := s.checkTopic(); err != nil {
		return err
	}
	if cfg.Delivery != ExactlyOnce {
		s.plain, err = kgo.NewClient(append(append([]kgo.Opt{}, opts...), kgo.DefaultProduceTopic(cfg.Topic))...)
		return err
	}
	s.names = sinktxn.Names{Prefix: cfg.TransactionalID, Vertex: ctx.TaskName()}
	s.m = sinktxn.New(s.names, s.subtask, ctx.Parallelism(), cfg.TransactionMaxAge)
	s.producers = map[int]*kgo.Client{}
	s.state = ctx.UnionListState("kafka-sink-transactions")
	return s.recover(ctx.RestoredCheckpointID())
}

// checkTopic fails clearly, and in bounded time, when the brokers cannot
// be reached or the topic does not exist.
func (s *Sink) checkTopic() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(s.admin).ListTopics(ctx, s.cfg.Topic)
	if err != nil {
		return fmt.Errorf("kafka-sink: brokers unreachable: %w", err)
	}
	if t, ok := topics[s.cfg.Topic]; !ok || t.Err != nil {
		return fmt.Errorf("kafka-sink: topic %q does not exist on the brokers", s.cfg.Topic)
	}
	return nil
}

func (s *Sink) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// recover carries out the machine's restore plan: commit what checkpoint
// pre-committed for the subtasks this one answers for, fence their other
// transactional IDs, and fence the open transactions the brokers list
// under them.
func (s *Sink) recover(checkpoint int64) error {
	plan, err := s.m.Restore(checkpoint, s.state.Get())
	if err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, t := range plan.Commit {
		if err := s.commitRestored(ctx, t); err != nil {
			return err
		}
	}
	// An open transaction holds back every read_committed consumer of its
	// partitions until the broker's timeout ends it: abort them now.
	for _, slot := range plan.Fence {
		if err := s.fence(ctx, s.names.ID(slot)); err != nil {
			return err
		}
	}
	if err := s.fenceListed(ctx); err != nil {
		return err
	}
	s.state.Update([][]byte{s.m.Encode()})
	return nil
}

// retriable are the answers a transaction coordinator gives while it is
// busy (completing an earlier EndTxn, loading, moving): asked again, it
// answers for good.
func retriable(err error) bool {
	return errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.NotCoordinator) ||
		errors.Is(err, kerr.RequestTimedOut) || kerr.IsRetriable(err)
}

// retry runs f until it succeeds, fails for good, or ctx ends.
func retry(ctx context.Context, f func() error) error {
	backoff := 10 * time.Millisecond
	for {
		err := f()
		if err == nil || !retriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still refused when the time for the restore ran out: %v)", err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// commitByProducer commits pre-committed transaction t as its producer
// (the ID and epoch the checkpoint holds) would: a commit the broker
// already applied answers as done.
func (s *Sink) commitByProducer(ctx context.Context, t sinktxn.Txn) error {
	return retry(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = s.names.ID(t.Slot), t.Producer, t.Epoch, true
		resp, err := req.RequestWith(ctx, s.admin)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// commitRestored commits a transaction a restored checkpoint pre-committed,
// as its producer (the stored ID and epoch) would have.
func (s *Sink) commitRestored(ctx context.Context, t sinktxn.Txn) error {
	id := s.names.ID(t.Slot)
	if err := s.commitByProducer(ctx, t); err != nil {
		// The broker no longer has the transaction as the producer's
		// last: aborted by the broker's timeout (or its ID expired), so
		// its records are gone.
		return fmt.Errorf("kafka-sink: transaction %s of checkpoint %d cannot be committed (%v): its records are lost — was the job down longer than transaction-timeout (%s) allows?",
			id, t.Checkpoint, err, s.cfg.TransactionTimeout)
	}
	s.log.Info("committed a transaction of the restored checkpoint", "transactional_id", id, "checkpoint_id", t.Checkpoint)
	return nil
}

// fence initialises id's producer anew, which aborts its open
// transaction, if any.
func (s *Sink) fence(ctx context.Context, id string) error {
	err := retry(ctx, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(s.cfg.TransactionTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, s.admin)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	if err != nil {
		return fmt.Errorf("kafka-sink: fence transactional id %s: %w", id, err)
	}
	return nil
}

// fenceListed fences the open transactions the brokers list that the
// machine says are this subtask's to abort: those of slots used after the
// last checkpoint and of subtasks of an attempt at a higher parallelism.
// Brokers before Kafka 3.0 cannot list them; their transactions end at
// the broker's timeout.
func (s *Sink) fenceListed(ctx context.Context) error {
	listed, err := kadm.NewClient(s.admin).ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort"})
	if err != nil {
		if errors.Is(err, kerr.UnsupportedVersion) || errors.Is(err, kgo.ErrClientClosed) {
			s.log.Warn("kafka-sink: the brokers cannot list transactions; transactions left open beyond the checkpoint's slots end at the broker's timeout", "err", err)
			return nil
		}
		return fmt.Errorf("kafka-sink: list open transactions: %w", err)
	}
	ids := listed.TransactionalIDs()
	slices.Sort(ids)
	for _, id := range ids {
		if s.m.FenceOpen(id) {
			if err := s.fence(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// producer is slot's transactional producer, made on first use (its
// initialisation fences the ID: what an earlier attempt left open is
// aborted).
func (s *Sink) producer(slot int) (*kgo.Client, error) {
	if c := s.producers[slot]; c != nil {
		return c, nil
	}
	ends := &atomic.Int64{}
	opts := append(append([]kgo.Opt{}, s.opts...),
		kgo.DefaultProduceTopic(s.cfg.Topic),
		kgo.TransactionalID(s.names.ID(sinktxn.Slot{Subtask: s.subtask, Index: slot})),
		kgo.TransactionTimeout(s.cfg.TransactionTimeout),
		kgo.WithHooks(endTxnCounter{ends}),
	)
	c, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka-sink: %w", err)
	}
	s.producers[slot] = c
	if s.ends == nil {
		s.ends, s.written = map[int]*atomic.Int64{}, map[int]writes{}
	}
	s.ends[slot] = ends
	return c, nil
}

// writes is what a transaction wrote: how many records, to which topics.
type writes struct {
	records int
	topics  []string
}

func (w *writes) add(topic string) {
	w.records++
	if !slices.Contains(w.topics, topic) {
		w.topics = append(w.topics, topic)
	}
}

// partitionsLoaded says whether cl's producer shows topic's partitions,
// as its EndTransaction sees them. A retriable load error is not: the
// client keeps it, with no partitions, until a later lookup succeeds, and
// that one hands out the waiting records before it stores the partitions
// (a topic created after the producer first asked for it).
func partitionsLoaded(cl *kgo.Client, topic string) bool {
	leader, _, err := cl.PartitionLeader(topic, 0)
	return leader >= 0 || err != nil && !kerr.IsRetriable(err)
}

// awaitLoaded waits until cl's producer shows the partitions of every topic
// w wrote to. franz-go (v1.22.3) hands a new topic's waiting records to
// their partitions before it stores the partitions where EndTransaction
// looks for what the transaction added; the store follows within
// microseconds, but under load a produce, its flush and the commit can
// all run first. The commit then finds nothing added and silently skips
// the EndTxn (before Kafka 4) or turns it into an abort (Kafka 4): the
// records are lost. A transaction's first write to a topic is exposed:
// every new producer's first transaction, and a topic-header sink's first
// record to each topic.
func (s *Sink) awaitLoaded(ctx context.Context, cl *kgo.Client, w writes) error {
	loaded := s.loaded
	if loaded == nil {
		loaded = partitionsLoaded
	}
	for _, t := range w.topics {
		// franz-go offers no notification of the store: poll.
		for backoff := 50 * time.Microsecond; !loaded(cl, t); backoff = min(2*backoff, 10*time.Millisecond) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("the Kafka client never showed the partitions of topic %s it wrote to: %w", t, ctx.Err())
			case <-time.After(backoff):
			}
		}
	}
	return nil
}

// endTxnCounter counts the EndTxn requests a producer wrote to a broker.
type endTxnCounter struct{ n *atomic.Int64 }

func (e endTxnCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.EndTxn.Int16() && err == nil {
		e.n.Add(1)
	}
}

func (s *Sink) ProcessRecord(r sdk.Record, _ sdk.Collector) error {
	if err := s.failed(); err != nil {
		return err
	}
	rec := &kgo.Record{Key: r.Key, Value: r.Value}
	if s.cfg.Tombstones {
		if len(r.Value) == 0 {
			// A tombstone's empty value is an empty slice from a chained
			// operator (nil through the network): Kafka's null is nil.
			rec.Value = nil
		}
		if rec.Key == nil {
			// An upsert output's key is never absent, but an empty one
			// (a CSV key of a NULL) crosses the network as nil, which
			// would be Kafka's null key: another partition than the
			// key's other records (the sticky partitioner's), and a
			// record a compacted topic refuses.
			rec.Key = []byte{}
		}
	}
	rec.Topic, rec.Headers = s.route(r.Headers)
	if r.Timestamp != 0 {
		rec.Timestamp = time.UnixMilli(r.Timestamp)
	}
	cl := s.plain
	if s.cfg.Delivery == ExactlyOnce {
		if s.cur == nil {
			if err := s.begin(); err != nil {
				return err
			}
		}
		cl = s.cur
		topic := rec.Topic
		if topic == "" {
			topic = s.cfg.Topic
		}
		s.curWrites.add(topic)
	}
	cl.Produce(context.Background(), rec, s.produced)
	return nil
}

// route picks a record's topic ("" for the default) from its headers and
// converts the headers that are written.
func (s *Sink) route(hs []sdk.Header) (string, []kgo.RecordHeader) {
	if len(hs) == 0 {
		return "", nil
	}
	topic := ""
	out := make([]kgo.RecordHeader, 0, len(hs))
	for _, h := range hs {
		if s.cfg.TopicHeader != "" && h.Key == s.cfg.TopicHeader {
			topic = string(h.Value)
			continue
		}
		out = append(out, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return topic, out
}

// begin opens a transaction on the slot the machine gives.
func (s *Sink) begin() error {
	slot, err := s.m.Begin(s.clock())
	if err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	cl, err := s.producer(slot.Index)
	if err != nil {
		return err
	}
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("kafka-sink: begin transaction on %s: %w", s.names.ID(slot), err)
	}
	s.cur, s.curWrites = cl, writes{}
	s.arm()
	return nil
}

// arm sets the wall-clock timer to the machine's deadline, so that a
// subtask whose records or checkpoints stopped still notices in time.
func (s *Sink) arm() {
	if s.now != nil {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.overdue.Store(false)
	if d := s.m.Deadline(); !d.IsZero() {
		s.timer = time.AfterFunc(time.Until(d), func() { s.overdue.Store(true) })
	}
}

// produced records the first failed write; the mailbox sees it at the
// next record or checkpoint.
func (s *Sink) produced(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	if s.sendErr == nil {
		s.sendErr = fmt.Errorf("kafka-sink: write to topic %s on %s: %w", r.Topic, s.servers, err)
	}
	s.mu.Unlock()
}

// failed is the first failed write, or the machine's report of a
// transaction kept too long.
func (s *Sink) failed() error {
	s.mu.Lock()
	err := s.sendErr
	s.mu.Unlock()
	if err != nil || s.m == nil || (s.now == nil && !s.overdue.Load()) {
		return err
	}
	if err := s.m.Expired(s.clock()); err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	return nil
}

// SnapshotState pre-commits: every record written so far is in Kafka
// (flushed), and the open transaction, with its producer ID and epoch, goes
// into the checkpoint, to be committed when it completes.
func (s *Sink) SnapshotState(id int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch s.cfg.Delivery {
	case None:
		return nil
	case AtLeastOnce:
		if err := s.plain.Flush(ctx); err != nil {
			return fmt.Errorf("kafka-sink: flush: %w", err)
		}
		return s.failed()
	}
	if err := s.failed(); err != nil {
		return err
	}
	var p *sinktxn.Producer
	if slot, ok := s.m.Open(); ok {
		if err := s.cur.Flush(ctx); err != nil {
			return fmt.Errorf("kafka-sink: flush: %w", err)
		}
		if err := s.failed(); err != nil {
			return err
		}
		pid, epoch, err := s.cur.ProducerID(ctx)
		if err != nil {
			return fmt.Errorf("kafka-sink: producer id of %s: %w", s.names.ID(slot), err)
		}
		p = &sinktxn.Producer{ID: pid, Epoch: epoch}
		s.written[slot.Index] = s.curWrites
	}
	item, err := s.m.Snapshot(id, p)
	if err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	s.cur = nil
	s.state.Update([][]byte{item})
	return nil
}

// NotifyCheckpointComplete commits every transaction pre-committed up to
// checkpoint id (a notification may stand for earlier ones that got none).
func (s *Sink) NotifyCheckpointComplete(id int64) error {
	if s.cfg.Delivery != ExactlyOnce {
		return nil
	}
	if err := fault.Point(fault.SinkBeforeCommit); err != nil {
		return fmt.Errorf("kafka-sink: commit for checkpoint %d: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, t := range s.m.Complete(id) {
		ends := s.ends[t.Slot.Index]
		var before int64
		if ends != nil {
			before = ends.Load()
		}
		cl, w := s.producers[t.Slot.Index], s.written[t.Slot.Index]
		if err := s.awaitLoaded(ctx, cl, w); err != nil {
			return fmt.Errorf("kafka-sink: commit transaction %s of checkpoint %d: %w", s.names.ID(t.Slot), t.Checkpoint, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka-sink: commit transaction %s of checkpoint %d: %w", s.names.ID(t.Slot), t.Checkpoint, err)
		}
		// franz-go ends a transaction without asking the broker when it
		// believes nothing was added to it (see awaitLoaded for the one
		// way known to make it believe so wrongly). When it sent no
		// EndTxn for a transaction that holds records, the sink commits
		// it by its producer ID and epoch itself.
		if ends != nil && ends.Load() == before && w.records > 0 {
			s.log.Warn("kafka-sink: the Kafka client ended a transaction holding records without committing it; committing it by its producer", "transactional_id", s.names.ID(t.Slot), "records", w.records, "checkpoint_id", t.Checkpoint)
			if err := s.commitByProducer(ctx, t); err != nil {
				return fmt.Errorf("kafka-sink: commit transaction %s of checkpoint %d by its producer: %w", s.names.ID(t.Slot), t.Checkpoint, err)
			}
		}
		delete(s.written, t.Slot.Index)
		s.m.Committed(t)
		// Committed here, not yet across the job's other subtasks.
		if err := fault.Point(fault.SinkMidCommit); err != nil {
			return fmt.Errorf("kafka-sink: after committing %s: %w", s.names.ID(t.Slot), err)
		}
	}
	s.arm()
	return s.failed()
}

// NotifyCheckpointAborted keeps the checkpoint's transaction: its records
// are not written again (the next checkpoint's positions are past them),
// so the next completed checkpoint commits it — unless it would live
// longer than transaction-max-age, when the subtask fails instead.
func (s *Sink) NotifyCheckpointAborted(int64) error {
	if s.cfg.Delivery != ExactlyOnce {
		return nil
	}
	return s.failed()
}

// Close aborts the open transaction, which no checkpoint recorded: the
// restored job writes its records again. Pre-committed ones are left to
// the restore, which commits them (a job cancelled for good leaves them
// to the broker's timeout: a retained checkpoint may still be restored
// and commit them).
func (s *Sink) Close() error {
	var errs []error
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.cur != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.cur.AbortBufferedRecords(ctx)
		if err := s.cur.EndTransaction(ctx, kgo.TryAbort); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
		cancel()
	}
	for _, c := range s.producers {
		c.Close()
	}
	if s.plain != nil {
		s.plain.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
	return errors.Join(errs...)
}
