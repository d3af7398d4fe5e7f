package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/kafka/kafkacfg"
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

// ringSize is how many transactional IDs a subtask cycles through: a
// checkpoint's transaction waits for its completion while the next ones
// are written.
const ringSize = 4

// txn is a transaction the sink pre-committed at a checkpoint.
type txn struct {
	checkpoint int64
	id         string
	producer   int64
	epoch      int16
	slot       int // -1 for one restored from a checkpoint
}

// Sink is kafka-sink: the record's key, value, timestamp and headers to
// topic, with the delivery guarantee configured. With topic-header set,
// a record carrying that header goes to the topic its value names (the
// header itself is not written).
//
// Exactly once is Flink's two-phase commit. Records go into a
// transaction of one of the subtask's transactional IDs,
// <prefix>-<vertex>-<subtask>-<slot>; at the checkpoint's snapshot the
// transaction is flushed (pre-committed) and its (transactional ID,
// producer ID, epoch) stored in the checkpoint; when the checkpoint
// completes it is committed. A restored subtask first commits the
// transactions its checkpoint pre-committed, resuming them with the
// stored producer ID and epoch (a commit the broker already applied is
// success), then fences every other transactional ID of its own (and of
// subtasks that no longer exist, when the job was scaled down): whatever
// they left open is aborted.
type Sink struct {
	cfg     SinkConfig
	servers string // for messages
	opts    []kgo.Opt
	vertex  string
	subtask int
	log     *slog.Logger
	state   sdk.ListState
	admin   *kgo.Client
	plain   *kgo.Client
	slots   [ringSize]*kgo.Client
	busy    [ringSize]bool
	next    int
	cur     int // slot of the open transaction, -1 when none
	count   int // records in the open transaction
	pending []txn
	// parallelism is the vertex's, stored with the state so a restore at
	// another one knows which old subtasks' IDs to fence.
	parallelism int

	mu      sync.Mutex
	sendErr error
}

func (s *Sink) Open(ctx sdk.Context) error {
	cfg, err := kafkacfg.ParseSinkConfig(ctx.Config())
	if err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	opts, err := clientOptions(ctx.Config())
	if err != nil {
		return fmt.Errorf("kafka-sink: %w", err)
	}
	s.cfg, s.opts, s.cur = cfg, opts, -1
	s.servers, _ = ctx.Config().String("bootstrap-servers", "")
	s.vertex, s.subtask, s.log = ctx.TaskName(), ctx.SubtaskIndex(), ctx.Logger()
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
	s.state = ctx.UnionListState("kafka-sink-transactions")
	return s.recover(ctx.Parallelism())
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

// txnID is the transactional ID of slot of subtask.
func (s *Sink) txnID(subtask, slot int) string {
	return fmt.Sprintf("%s-%s-%d-%d", s.cfg.TransactionalID, s.vertex, subtask, slot)
}

// recover commits what the restored checkpoint pre-committed for the old
// subtasks this one answers for (old subtask k goes to k mod parallelism),
// then fences their transactional IDs, aborting what they left open.
func (s *Sink) recover(parallelism int) error {
	items := s.state.Get()
	oldParallelism := 0
	var mine []txn
	for _, it := range items {
		sub, par, txns, err := decodeSinkState(it)
		if err != nil {
			return fmt.Errorf("kafka-sink: restored state: %w", err)
		}
		oldParallelism = max(oldParallelism, par)
		if sub%parallelism == s.subtask {
			mine = append(mine, txns...)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, t := range mine {
		if err := s.commitRestored(ctx, t); err != nil {
			return err
		}
	}
	// Then fence the IDs of this subtask and of the gone ones it answers
	// for: what they left open is aborted now, not when the broker's
	// transaction timeout ends it, since an open transaction holds back
	// every read_committed consumer of its partitions.
	for k := s.subtask; k < max(oldParallelism, s.subtask+1); k += parallelism {
		for slot := range ringSize {
			if err := s.fence(ctx, s.txnID(k, slot)); err != nil {
				return err
			}
		}
	}
	s.writeState(parallelism)
	return nil
}

// commitRestored commits a transaction a restored checkpoint pre-committed,
// as its producer (the stored ID and epoch) would have.
func (s *Sink) commitRestored(ctx context.Context, t txn) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = t.id, t.producer, t.epoch, true
	resp, err := req.RequestWith(ctx, s.admin)
	if err != nil {
		return fmt.Errorf("kafka-sink: commit transaction %s of checkpoint %d: %w", t.id, t.checkpoint, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		// The transaction is not open any more: committed (by this sink
		// before it failed: success) or aborted (by the broker, after its
		// timeout: its records are lost).
		state, derr := s.describe(ctx, t.id)
		if derr == nil && state == "CompleteCommit" {
			return nil
		}
		return fmt.Errorf("kafka-sink: transaction %s of checkpoint %d cannot be committed (%v; state %q): its records are lost — was the job down longer than transaction-timeout (%s)?",
			t.id, t.checkpoint, err, state, s.cfg.TransactionTimeout)
	}
	s.log.Info("committed a transaction of the restored checkpoint", "transactional_id", t.id, "checkpoint_id", t.checkpoint)
	return nil
}

func (s *Sink) describe(ctx context.Context, id string) (string, error) {
	txns, err := kadm.NewClient(s.admin).DescribeTransactions(ctx, id)
	if err != nil {
		return "", err
	}
	d, ok := txns[id]
	if !ok || d.Err != nil {
		return "", fmt.Errorf("no description of %s", id)
	}
	return d.State, nil
}

// fence initialises id's producer anew, which aborts its open
// transaction, if any.
func (s *Sink) fence(ctx context.Context, id string) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(s.cfg.TransactionTimeout.Milliseconds())
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := req.RequestWith(ctx, s.admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("kafka-sink: fence transactional id %s: %w", id, err)
	}
	return nil
}

// producer is slot's transactional producer, made on first use (its
// initialisation fences the ID: what an earlier attempt left open is
// aborted).
func (s *Sink) producer(slot int) (*kgo.Client, error) {
	if c := s.slots[slot]; c != nil {
		return c, nil
	}
	opts := append(append([]kgo.Opt{}, s.opts...),
		kgo.DefaultProduceTopic(s.cfg.Topic),
		kgo.TransactionalID(s.txnID(s.subtask, slot)),
		kgo.TransactionTimeout(s.cfg.TransactionTimeout),
	)
	c, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka-sink: %w", err)
	}
	s.slots[slot] = c
	return c, nil
}

func (s *Sink) ProcessRecord(r sdk.Record, _ sdk.Collector) error {
	if err := s.failed(); err != nil {
		return err
	}
	rec := &kgo.Record{Key: r.Key, Value: r.Value}
	rec.Topic, rec.Headers = s.route(r.Headers)
	if r.Timestamp != 0 {
		rec.Timestamp = time.UnixMilli(r.Timestamp)
	}
	var cl *kgo.Client
	if s.cfg.Delivery != ExactlyOnce {
		cl = s.plain
	} else {
		if s.cur < 0 {
			if err := s.begin(); err != nil {
				return err
			}
		}
		cl = s.slots[s.cur]
		s.count++
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

// begin opens a transaction on the next free slot.
func (s *Sink) begin() error {
	slot := s.next
	if s.busy[slot] {
		return fmt.Errorf("kafka-sink: %d checkpoints pre-committed and none completed since: no transactional id is free", ringSize)
	}
	cl, err := s.producer(slot)
	if err != nil {
		return err
	}
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("kafka-sink: begin transaction on %s: %w", s.txnID(s.subtask, slot), err)
	}
	s.cur, s.count, s.next = slot, 0, (slot+1)%ringSize
	return nil
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

func (s *Sink) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendErr
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
	if s.cur >= 0 && s.count > 0 {
		cl := s.slots[s.cur]
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("kafka-sink: flush: %w", err)
		}
		if err := s.failed(); err != nil {
			return err
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			return fmt.Errorf("kafka-sink: producer id of %s: %w", s.txnID(s.subtask, s.cur), err)
		}
		s.pending = append(s.pending, txn{checkpoint: id, id: s.txnID(s.subtask, s.cur), producer: pid, epoch: epoch, slot: s.cur})
		s.busy[s.cur] = true
		s.cur = -1
	}
	s.writeState(0)
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
	kept := s.pending[:0]
	for _, t := range s.pending {
		if t.checkpoint > id {
			kept = append(kept, t)
			continue
		}
		if err := s.slots[t.slot].EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka-sink: commit transaction %s of checkpoint %d: %w", t.id, t.checkpoint, err)
		}
		// Committed here, not yet across the job's other subtasks.
		if err := fault.Point(fault.SinkMidCommit); err != nil {
			return fmt.Errorf("kafka-sink: after committing %s: %w", t.id, err)
		}
		s.busy[t.slot] = false
	}
	s.pending = kept
	return nil
}

// NotifyCheckpointAborted keeps the checkpoint's transaction: its records
// are not written again (the next checkpoint's positions are past them),
// so the next completed checkpoint commits it.
func (s *Sink) NotifyCheckpointAborted(int64) error { return nil }

// writeState stores this subtask's pre-committed transactions; parallelism
// 0 keeps the one read at open.
func (s *Sink) writeState(parallelism int) {
	if s.state == nil {
		return
	}
	if parallelism > 0 {
		s.parallelism = parallelism
	}
	s.state.Update([][]byte{encodeSinkState(s.subtask, s.parallelism, s.pending)})
}

func (s *Sink) Close() error {
	var errs []error
	// The open transaction was never pre-committed: its records will be
	// written again by the restored job. Pre-committed ones are left to
	// the restore, which commits them.
	if s.cur >= 0 && s.slots[s.cur] != nil && len(s.pending) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.slots[s.cur].AbortBufferedRecords(ctx)
		if err := s.slots[s.cur].EndTransaction(ctx, kgo.TryAbort); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
		cancel()
	}
	for _, c := range s.slots {
		if c != nil {
			c.Close()
		}
	}
	if s.plain != nil {
		s.plain.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
	return errors.Join(errs...)
}

func encodeSinkState(subtask, parallelism int, txns []txn) []byte {
	b := binary.AppendUvarint(nil, uint64(subtask))
	b = binary.AppendUvarint(b, uint64(parallelism))
	b = binary.AppendUvarint(b, uint64(len(txns)))
	for _, t := range txns {
		b = binary.AppendVarint(b, t.checkpoint)
		b = binary.AppendUvarint(b, uint64(len(t.id)))
		b = append(b, t.id...)
		b = binary.AppendVarint(b, t.producer)
		b = binary.AppendVarint(b, int64(t.epoch))
	}
	return b
}

func decodeSinkState(b []byte) (subtask, parallelism int, txns []txn, err error) {
	bad := errors.New("corrupt kafka-sink state")
	u := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			err = bad
			return 0
		}
		b = b[n:]
		return v
	}
	v := func() int64 {
		x, n := binary.Varint(b)
		if n <= 0 {
			err = bad
			return 0
		}
		b = b[n:]
		return x
	}
	subtask, parallelism = int(u()), int(u())
	n := u()
	for i := uint64(0); i < n && err == nil; i++ {
		t := txn{checkpoint: v(), slot: -1}
		l := u()
		if err != nil || l > uint64(len(b)) {
			return 0, 0, nil, bad
		}
		t.id, b = string(b[:l]), b[l:]
		t.producer, t.epoch = v(), int16(v())
		txns = append(txns, t)
	}
	if err == nil && len(b) != 0 {
		err = bad
	}
	return subtask, parallelism, txns, err
}
