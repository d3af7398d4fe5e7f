package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/internal/kafka/kafkacfg"
	"github.com/weirproject/weir/sdk"
)

// Source is kafka-source: it reads the partitions of one or more topics,
// each partition a split, and emits every record's key, value,
// timestamp (its event time) and headers.
//
//	config: {bootstrap-servers: host:port, topic: t | topics: [..] | topic-pattern: re,
//	         group-id: g, starting-offsets: earliest|latest|committed|timestamp:<ms>,
//	         isolation: read-committed|read-uncommitted, partition-discovery-interval: 1m,
//	         bounded: latest, open-timeout: 10s}
//
// Positions. The next offset to read of every partition is operator union
// list state, written at each checkpoint by the subtask owning the
// partition: a restore, at any parallelism, gives every subtask all
// positions and each takes those of the partitions it now owns, so the
// first record after a restore is the one after the last emitted before
// the checkpoint's barrier. Only emitted records move a position: what the
// client fetched but Emit did not hand downstream yet is fetched again
// after a restore. A restored partition the brokers do not list at open
// keeps its position, carried by its owner in every checkpoint until the
// partition is listed again (by partition discovery or at a later
// restore) and read from there: a metadata answer can leave out a
// partition that exists (a broker behind on a new topic), and reading it
// from its earliest offset once listed would emit its records twice. Only
// the positions of topics the configuration no longer names are dropped:
// those can never be listed again.
//
// Assignment. Partition p of topic t is read by subtask
// (fnv32a(t) mod parallelism + p) mod parallelism, Flink KafkaSource's
// rule: it depends on nothing but (t, p, parallelism), so a partition
// created while the job runs never moves an existing one to another
// subtask, and subtasks that learn of it at different times still agree
// on its owner. (An index into the sorted list of all partitions would
// shift when a topic gains partitions.)
//
// starting-offsets (default earliest) is where a partition starts at the
// job's first start; committed needs group-id and starts partitions
// without a commit at the earliest offset. Once the job was restored from
// a checkpoint, a partition with no position in it was created (or first
// listed) after that checkpoint and starts at its earliest offset, as
// partitions found by partition-discovery-interval do: the failed run may
// have emitted its records after the checkpoint, and anything later would
// skip them. A restore is told by the restored checkpoint's id, not by the
// positions: a checkpoint taken before any partition existed holds none.
//
// bounded: latest stops every partition at the end offset it had when the
// job first started (the last stable offset under read-committed, the high
// watermark under read-uncommitted); the stop offset is stored with the
// position, so a restored bounded job ends where the first run would
// have. For the same reason its partitions are those of the first start:
// after a restore, a partition with no position was created since and is
// done at once, its stop stored as its position so later restores skip it
// too. The source ends once every partition it reads reached its stop.
//
// group-id, when set, is only for monitoring (lag in Kafka tools): after
// each completed checkpoint the positions of that checkpoint are committed
// to the group, asynchronously; the source never reads them back except
// for starting-offsets: committed.
//
// Lag. weir_kafka_source_lag_records{topic,partition} is how far each
// partition's position is behind its end (the last stable offset under
// read-committed, the high watermark under read-uncommitted) as of the
// newest fetch: Flink's records-lag.
type Source struct {
	cfg                  kafkacfg.SourceConfig
	log                  *slog.Logger
	subtask, parallelism int
	opts                 []kgo.Opt // every client's: servers, TLS, SASL, logger

	lag sdk.Gauge

	// admin asks for metadata and offsets and commits to group-id.
	admin *kgo.Client
	// consumer fetches the partitions being read; nil while there are
	// none, since a direct consumer can only gain partitions once it was
	// created with some.
	consumer *kgo.Client

	parts   map[sourceTP]*sourcePart
	order   []*sourcePart // parts sorted, for deterministic snapshots
	active  int           // parts not done
	state   sdk.ListState
	opened  bool          // splits declared (at the first Emit)
	backoff time.Duration // the last idle backoff, grown while nothing comes
	// reading are the parts as last published, for the backlog
	// reporter's goroutine.
	reading atomic.Pointer[[]*sourcePart]
	// lags are each partition's lag as of its newest fetch, for the
	// backlog report (backlog-lag).
	lags map[sourceTP]int64
	// unlisted are the restored positions of partitions this subtask owns
	// but that were not listed at open: each checkpoint carries them until
	// the partition is listed again and resumes there.
	unlisted map[sourceTP]sourcePosition

	// unlistedBy is when a bounded source gives up waiting for the
	// unlisted partitions that still owe records (see ended).
	unlistedBy time.Time

	// found carries partitions the discovery goroutine found to Emit.
	found chan []*sourcePart
	stop  context.CancelFunc
	wg    sync.WaitGroup

	// pending are the positions snapshotted per checkpoint, committed to
	// group-id once their checkpoint completes.
	pending    map[int64]kadm.Offsets
	commitMu   sync.Mutex
	toCommit   kadm.Offsets // the newest completed checkpoint's, not yet committed
	commitWake chan struct{}
}

// sourceTP is a topic partition.
type sourceTP struct {
	topic     string
	partition int32
}

func (tp sourceTP) String() string { return tp.topic + "-" + strconv.Itoa(int(tp.partition)) }

// sourcePart is a partition this subtask reads.
type sourcePart struct {
	sourceTP
	next int64 // offset of the next record to emit
	stop int64 // bounded: offset to stop at; -1 when unbounded
	out  sdk.Collector
	done bool
	// pos, stopAt and finished are next, stop and done for the backlog
	// reporter's goroutine, updated after each fetch.
	pos      atomic.Int64
	stopAt   atomic.Int64
	finished atomic.Bool
}

const (
	// sourceMaxPerEmit bounds one Emit, so checkpoints do not wait long
	// behind it.
	sourceMaxPerEmit = 512
	// The idle backoff doubles from min to max while polls come back
	// empty: quick to pick up a trickle, cheap when a topic is quiet.
	sourceMinBackoff = time.Millisecond
	sourceMaxBackoff = 50 * time.Millisecond
	// pendingInterval is how often the backlog is reported.
	pendingInterval = time.Second
	// sourceStateName is the union list state of the positions.
	sourceStateName = "kafka-source-offsets"
)

// sourceOwner is the subtask that reads topic partition tp (see Source).
func sourceOwner(tp sourceTP, parallelism int) int {
	h := fnv.New32a()
	h.Write([]byte(tp.topic))
	start := int(h.Sum32() % uint32(parallelism))
	return (start + int(tp.partition)) % parallelism
}

func (s *Source) Open(ctx sdk.Context) (err error) {
	defer func() {
		if err != nil {
			s.Close() // the clients made before the failure
		}
	}()
	cfg, err := kafkacfg.ParseSourceConfig(ctx.Config())
	if err != nil {
		return fmt.Errorf("kafka-source: %w", err)
	}
	opts, err := clientOptions(ctx.Config(), ctx.Logger())
	if err != nil {
		return fmt.Errorf("kafka-source: %w", err)
	}
	s.cfg, s.subtask, s.parallelism = cfg, ctx.SubtaskIndex(), ctx.Parallelism()
	s.log = ctx.Logger().With("operator", "kafka-source")
	s.lag = ctx.Metrics().Gauge("weir_kafka_source_lag_records",
		"Records a kafka-source partition's position is behind the partition's end (last stable offset under read-committed), as of its newest fetch.",
		"topic", "partition")
	s.opts = append(opts, kgo.WithLogger(sourceKgoLogger{s.log}))
	if s.admin, err = kgo.NewClient(s.opts...); err != nil {
		return fmt.Errorf("kafka-source: %w", err)
	}
	s.state = ctx.UnionListState(sourceStateName)
	restored, err := decodeSourcePositions(s.state.Get())
	if err != nil {
		return fmt.Errorf("kafka-source: restore positions: %w", err)
	}
	// A checkpoint taken while no partition was listed holds no position:
	// the restore is told by the checkpoint id, not by what it holds.
	restoring := ctx.RestoredCheckpointID() > 0 || len(restored) > 0

	octx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	all, err := s.openPartitions(octx)
	if err != nil {
		return err
	}
	s.parts = map[sourceTP]*sourcePart{}
	known := map[sourceTP]bool{} // for discovery: the partitions handled
	var fresh []*sourcePart      // owned, with no restored position
	var unstopped []*sourcePart  // bounded, with no restored stop offset
	var late []*sourcePart       // bounded, created after the first start
	listed := make(map[sourceTP]bool, len(all))
	for _, tp := range all {
		listed[tp] = true
		if sourceOwner(tp, s.parallelism) != s.subtask {
			continue
		}
		known[tp] = true
		p := &sourcePart{sourceTP: tp, stop: -1}
		pos, ok := restored[tp]
		if ok {
			p.next = pos.next
			if cfg.Bounded {
				p.stop = pos.stop
			}
		} else {
			fresh = append(fresh, p)
		}
		switch {
		case cfg.Bounded && restoring && !ok:
			late = append(late, p)
		case cfg.Bounded && p.stop < 0:
			unstopped = append(unstopped, p)
		}
		s.add(p)
	}
	start := cfg.Start
	if restoring {
		// Restored: partitions the checkpoint does not know are new.
		start = kafkacfg.StartEarliest
		if len(late) > 0 {
			s.log.Info("kafka-source: bounded: partitions created after the first start are not read", "partitions", len(late))
		} else if len(fresh) > 0 {
			s.log.Info("kafka-source: partitions not in the restored checkpoint start at their earliest offset", "partitions", len(fresh))
		}
		s.keepUnlisted(restored, listed)
	}
	if err := s.resolveStart(octx, fresh, start); err != nil {
		return err
	}
	if err := s.resolveStop(octx, unstopped); err != nil {
		return err
	}
	for _, p := range late {
		// Done at once, and stored so: a stop below zero would be
		// resolved to the end at the next restore.
		p.stop = p.next
	}
	var reading []*sourcePart
	for _, p := range s.order {
		if cfg.Bounded && p.next >= p.stop {
			p.done = true
			continue
		}
		reading = append(reading, p)
	}
	s.active = len(reading)
	if err := s.consume(reading); err != nil {
		return err
	}
	s.log.Info("kafka-source opened", "partitions", len(s.order), "reading", len(reading), "restored", restoring, "unlisted", len(s.unlisted))

	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.published()
	s.wg.Go(func() { s.reportPending(bg, ctx, pendingInterval) })
	switch {
	case cfg.Discovery > 0:
		s.found = make(chan []*sourcePart)
		unlisted := maps.Clone(s.unlisted) // the goroutine's own: Emit deletes from s.unlisted
		s.wg.Go(func() { s.discoverLoop(bg, cfg.Discovery, known, unlisted) })
	case cfg.Bounded && len(s.owedUnlisted()) > 0:
		// A bounded source discovers nothing, but the restored partitions
		// left out of the metadata still owe records below their stops:
		// they are listed again until they come back (or the wait ends).
		s.unlistedBy = time.Now().Add(unlistedWait)
		s.found = make(chan []*sourcePart)
		unlisted := maps.Clone(s.unlisted)
		s.wg.Go(func() { s.discoverLoop(bg, relistInterval, known, unlisted) })
	case len(s.unlisted) > 0:
		// Without discovery new partitions are not read, but a restored
		// one left out of one metadata answer still is: listed again
		// until it comes back, or its records would wait for the next
		// restart.
		s.found = make(chan []*sourcePart)
		unlisted := maps.Clone(s.unlisted)
		s.wg.Go(func() { s.discoverLoop(bg, relistInterval, known, unlisted) })
	}
	if cfg.Group != "" {
		s.pending = map[int64]kadm.Offsets{}
		s.commitWake = make(chan struct{}, 1)
		s.wg.Go(func() { s.commitLoop(bg) })
	}
	return nil
}

// keepUnlisted keeps the restored positions of the partitions this
// subtask owns that are not listed now, in s.unlisted. A metadata answer
// can leave out a partition that exists (a broker behind on a new topic
// or partition): dropping its position would have it read again from its
// earliest offset once it is listed. Only positions of topics the
// configuration no longer names are dropped, as those can never be
// listed again.
func (s *Source) keepUnlisted(restored map[sourceTP]sourcePosition, listed map[sourceTP]bool) {
	for tp, pos := range restored {
		if listed[tp] || sourceOwner(tp, s.parallelism) != s.subtask {
			continue
		}
		if !s.configured(tp.topic) {
			s.log.Warn("kafka-source: dropping the restored position of a partition no longer configured", "partition", tp.String())
			continue
		}
		if s.unlisted == nil {
			s.unlisted = map[sourceTP]sourcePosition{}
		}
		s.unlisted[tp] = pos
		s.log.Warn("kafka-source: a restored partition is not listed (topic deleted, or metadata behind): keeping its position for when it is listed again", "partition", tp.String(), "position", pos.next)
	}
}

// How often, and how long, a bounded source lists the brokers' partitions
// again for restored partitions the metadata left out at open.
const relistInterval = time.Second

// unlistedWait is a variable for the tests of its end.
var unlistedWait = time.Minute

// owedUnlisted lists, sorted, the unlisted partitions of a bounded source
// whose restored position is below its stop (or has none): records it
// must still read.
func (s *Source) owedUnlisted() []sourceTP {
	var owed []sourceTP
	for tp, pos := range s.unlisted {
		if pos.stop < 0 || pos.next < pos.stop {
			owed = append(owed, tp)
		}
	}
	slices.SortFunc(owed, sourceCompareTP)
	return owed
}

// ended reports whether a bounded source read all its input: every
// partition it reads reached its stop, and no restored partition the
// metadata left out still owes records. Finishing without those would lose
// them, and waiting for ever would hang the job: one still unlisted after
// unlistedWait fails the subtask instead, naming it.
func (s *Source) ended() (bool, error) {
	if s.active > 0 {
		return false, nil
	}
	owed := s.owedUnlisted()
	if len(owed) == 0 {
		return true, nil
	}
	if time.Now().After(s.unlistedBy) {
		pos := s.unlisted[owed[0]]
		return false, fmt.Errorf("kafka-source: bounded: %d restored partitions are not listed by the brokers but still owe records (first: %s from offset %d to %d); not finishing without them", len(owed), owed[0].String(), pos.next, pos.stop)
	}
	return false, nil
}

// configured is whether topic is one the source reads, if it exists.
func (s *Source) configured(topic string) bool {
	if s.cfg.Pattern != nil {
		return s.cfg.Pattern.MatchString(topic)
	}
	return slices.Contains(s.cfg.Topics, topic)
}

// openPartitions lists the partitions of the configured topics, waiting
// out retriable errors (a topic just created has no leader yet) until ctx
// ends, and saying clearly what failed.
func (s *Source) openPartitions(ctx context.Context) ([]sourceTP, error) {
	for {
		all, err := s.listPartitions(ctx)
		if err == nil {
			if len(all) == 0 && s.cfg.Pattern != nil && s.cfg.Discovery == 0 {
				return nil, fmt.Errorf("kafka-source: no topic on %s matches topic-pattern %q", s.cfg.Servers, s.cfg.Pattern)
			}
			return all, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("kafka-source: no answer within open-timeout %s: %w", s.cfg.Timeout, err)
		}
		if !kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("kafka-source: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kafka-source: partitions of %s not available within %s: %w", s.topicsString(), s.cfg.Timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Source) topicsString() string {
	if s.cfg.Pattern != nil {
		return "topic-pattern " + strconv.Quote(s.cfg.Pattern.String())
	}
	return strings.Join(s.cfg.Topics, ",")
}

// listPartitions asks the brokers, bypassing the client's metadata cache,
// for the partitions of the configured topics, sorted.
func (s *Source) listPartitions(ctx context.Context) ([]sourceTP, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	if s.cfg.Pattern == nil {
		for _, t := range s.cfg.Topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	} // nil Topics: every topic, for the pattern
	resp, err := req.RequestWith(ctx, s.admin)
	if err != nil {
		return nil, fmt.Errorf("bootstrap-servers %s unreachable: metadata request: %w", s.cfg.Servers, err)
	}
	var tps []sourceTP
	seen := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		if s.cfg.Pattern != nil && (t.IsInternal || !s.cfg.Pattern.MatchString(name)) {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if s.cfg.Pattern != nil && errors.Is(err, kerr.UnknownTopicOrPartition) {
				continue // deleted between listing and describing
			}
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("topic %q does not exist on %s: %w", name, s.cfg.Servers, err)
			}
			return nil, fmt.Errorf("topic %q on %s: %w", name, s.cfg.Servers, err)
		}
		seen[name] = true
		for _, p := range t.Partitions {
			tps = append(tps, sourceTP{name, p.Partition})
		}
	}
	for _, t := range s.cfg.Topics {
		if !seen[t] {
			return nil, fmt.Errorf("topic %q does not exist on %s: %w", t, s.cfg.Servers, kerr.UnknownTopicOrPartition)
		}
	}
	slices.SortFunc(tps, sourceCompareTP)
	return tps, nil
}

func sourceCompareTP(a, b sourceTP) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition) - int(b.partition)
}

// add makes p one of the partitions this subtask reads.
func (s *Source) add(p *sourcePart) {
	s.parts[p.sourceTP] = p
	i, _ := slices.BinarySearchFunc(s.order, p.sourceTP, func(q *sourcePart, tp sourceTP) int { return sourceCompareTP(q.sourceTP, tp) })
	s.order = slices.Insert(s.order, i, p)
	// The reporter's list changes only here, not at every fetch.
	parts := slices.Clone(s.order)
	s.reading.Store(&parts)
	p.publish()
}

// publish makes p's position visible to the backlog reporter.
func (p *sourcePart) publish() {
	p.pos.Store(p.next)
	p.stopAt.Store(p.stop)
	p.finished.Store(p.done)
}

// published makes the parts' positions visible to the backlog reporter.
func (s *Source) published() {
	for _, p := range s.order {
		p.publish()
	}
}

// resolveStart sets the next offset of parts to a concrete one: a
// checkpoint must hold an offset, not "latest", or a restore would skip
// what was written in between.
func (s *Source) resolveStart(ctx context.Context, parts []*sourcePart, how kafkacfg.Start) error {
	if len(parts) == 0 {
		return nil
	}
	adm := kadm.NewClient(s.admin)
	set := func(p *sourcePart, o int64) { p.next = o }
	switch how {
	case kafkacfg.StartLatest:
		// Under read-committed, latest is the last stable offset: a
		// transaction open now may still commit, and its records come
		// after it.
		if s.cfg.ReadCommitted {
			return s.listOffsets(ctx, "latest", parts, adm.ListCommittedOffsets, set)
		}
		return s.listOffsets(ctx, "latest", parts, adm.ListEndOffsets, set)
	case kafkacfg.StartTimestamp:
		list := func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, s.cfg.StartMillis, topics...)
		}
		return s.listOffsets(ctx, "timestamp", parts, list, set)
	case kafkacfg.StartCommitted:
		committed, err := adm.FetchOffsetsForTopics(ctx, s.cfg.Group, sourceTopics(parts)...)
		if errors.Is(err, kerr.GroupIDNotFound) {
			committed, err = nil, nil // a group that never committed
		}
		if err != nil {
			return fmt.Errorf("kafka-source: offsets committed by group %q: %w", s.cfg.Group, err)
		}
		var rest []*sourcePart
		for _, p := range parts {
			if o, ok := committed.Lookup(p.topic, p.partition); ok && o.Err == nil && o.At >= 0 {
				p.next = o.At
			} else {
				rest = append(rest, p)
			}
		}
		if len(rest) > 0 {
			s.log.Info("kafka-source: partitions without a commit start at the earliest offset", "group", s.cfg.Group, "partitions", len(rest))
		}
		return s.listOffsets(ctx, "earliest", rest, adm.ListStartOffsets, set)
	default:
		return s.listOffsets(ctx, "earliest", parts, adm.ListStartOffsets, set)
	}
}

// resolveStop sets the stop offset of bounded parts to their end now.
func (s *Source) resolveStop(ctx context.Context, parts []*sourcePart) error {
	adm := kadm.NewClient(s.admin)
	set := func(p *sourcePart, o int64) { p.stop = o }
	if s.cfg.ReadCommitted {
		// Read-committed fetches stop at the last stable offset: a
		// higher stop would wait for open transactions.
		return s.listOffsets(ctx, "end", parts, adm.ListCommittedOffsets, set)
	}
	return s.listOffsets(ctx, "end", parts, adm.ListEndOffsets, set)
}

func (s *Source) listOffsets(ctx context.Context, what string, parts []*sourcePart,
	list func(context.Context, ...string) (kadm.ListedOffsets, error), set func(*sourcePart, int64)) error {
	if len(parts) == 0 {
		return nil
	}
	topics := sourceTopics(parts)
	listed, err := list(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka-source: list %s offsets of %s on %s: %w", what, strings.Join(topics, ","), s.cfg.Servers, err)
	}
	for _, p := range parts {
		o, ok := listed.Lookup(p.topic, p.partition)
		switch {
		case !ok:
			return fmt.Errorf("kafka-source: list %s offsets: no answer for %s", what, p.sourceTP)
		case o.Err != nil:
			return fmt.Errorf("kafka-source: list %s offset of %s: %w", what, p.sourceTP, o.Err)
		case o.Offset < 0:
			return fmt.Errorf("kafka-source: list %s offset of %s: none", what, p.sourceTP)
		}
		set(p, o.Offset)
	}
	return nil
}

func sourceTopics(parts []*sourcePart) []string {
	var topics []string
	for _, p := range parts {
		topics = append(topics, p.topic)
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}

// consume starts fetching parts from their positions.
func (s *Source) consume(parts []*sourcePart) error {
	if len(parts) == 0 {
		return nil
	}
	at := map[string]map[int32]kgo.Offset{}
	for _, p := range parts {
		if at[p.topic] == nil {
			at[p.topic] = map[int32]kgo.Offset{}
		}
		at[p.topic][p.partition] = kgo.NewOffset().At(p.next)
	}
	if s.consumer != nil {
		s.consumer.AddConsumePartitions(at)
		return nil
	}
	isolation := kgo.ReadUncommitted()
	if s.cfg.ReadCommitted {
		isolation = kgo.ReadCommitted()
	}
	var err error
	s.consumer, err = kgo.NewClient(append(slices.Clone(s.opts),
		kgo.ConsumePartitions(at),
		kgo.FetchIsolationLevel(isolation),
		// Control records (transaction markers) take offsets too: seeing
		// them moves a position past a transaction's end, so a bounded
		// partition whose last record is a marker reaches its stop.
		kgo.KeepControlRecords(),
		// franz-go v1.22.3's Close reads a fetch session's ID while the
		// fetch loop may still bump it (a data race the race detector
		// reports); without sessions the ID is never written. A source
		// subtask fetches few partitions, so sessions save little.
		kgo.DisableFetchSessions(),
		// A position out of range (retention deleted it) resumes at the
		// earliest offset left, like Kafka's auto.offset.reset=earliest.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Kafka's fetch.max.wait.ms rather than the client's 5s: a
		// partition added (discovered) while a fetch waits on a quiet
		// broker is fetched only from the next request.
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("kafka-source: consumer: %w", err)
	}
	return nil
}

func (s *Source) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	so, _ := out.(sdk.SourceOutput)
	if !s.opened {
		s.opened = true
		for _, p := range s.order {
			if !p.done {
				p.out = sourceSplit(out, so, p)
			}
		}
	}
	if s.found != nil {
		select {
		case found := <-s.found:
			var added []*sourcePart
			for _, p := range found {
				if s.parts[p.sourceTP] != nil {
					continue
				}
				if _, ok := s.unlisted[p.sourceTP]; ok {
					s.log.Info("kafka-source: a restored partition is listed again, reading it from its restored position", "partition", p.sourceTP.String(), "from", p.next)
					delete(s.unlisted, p.sourceTP) // now in s.order: one position per partition
				} else {
					s.log.Info("kafka-source: reading a new partition", "partition", p.sourceTP.String(), "from", p.next)
				}
				s.add(p)
				p.out = sourceSplit(out, so, p)
				if s.cfg.Bounded && p.next >= p.stop {
					p.done = true // it owed nothing: kept only for its position
					continue
				}
				added = append(added, p)
			}
			s.active += len(added)
			if err := s.consume(added); err != nil {
				return sdk.SourceStatus{}, err
			}
			s.published()
		default:
		}
	}
	if s.active == 0 {
		if s.cfg.Bounded {
			if done, err := s.ended(); err != nil || done {
				return sdk.SourceStatus{EndOfInput: done}, err
			}
		}
		return sdk.SourceStatus{Backoff: sourceMaxBackoff}, nil
	}

	// A nil context polls without waiting: what the client buffered. Not
	// polling is the back-pressure: the client fetches no more from a
	// broker while its last fetch is buffered.
	fetches := s.consumer.PollRecords(nil, sourceMaxPerEmit) //nolint:staticcheck // a nil context is kgo's "do not wait"
	if err := s.fetchErrors(fetches); err != nil {
		return sdk.SourceStatus{}, err
	}
	moved := false
	var finished map[string][]int32
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		p := s.parts[sourceTP{fp.Topic, fp.Partition}]
		for _, r := range fp.Records {
			if p == nil || p.done {
				break // fetched before it was finished
			}
			if s.cfg.Bounded && r.Offset >= p.stop {
				s.finish(p, so, &finished) // past a gap (compaction) to its stop
				break
			}
			if !r.Attrs.IsControl() {
				p.out.Collect(sdk.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli(), Headers: sourceHeaders(r.Headers)})
			}
			p.next = r.Offset + 1
			moved = true
			if s.cfg.Bounded && p.next >= p.stop {
				s.finish(p, so, &finished)
			}
		}
		if p != nil {
			end := fp.HighWatermark
			if s.cfg.ReadCommitted {
				end = fp.LastStableOffset
			}
			lag := max(end-p.next, 0)
			s.lag.Set(float64(lag), p.topic, strconv.Itoa(int(p.partition)))
			if s.cfg.BacklogLag > 0 {
				if s.lags == nil {
					s.lags = map[sourceTP]int64{}
				}
				s.lags[p.sourceTP] = lag
			}
		}
	})
	if finished != nil {
		s.consumer.RemoveConsumePartitions(finished)
	}
	if moved || finished != nil {
		s.published()
	}
	if s.active == 0 && s.cfg.Bounded {
		if done, err := s.ended(); err != nil || done {
			return sdk.SourceStatus{EndOfInput: done}, err
		}
	}
	st := sdk.SourceStatus{Backlog: s.backlog()}
	if moved {
		s.backoff = 0
		return st, nil
	}
	s.backoff = min(max(2*s.backoff, sourceMinBackoff), sourceMaxBackoff)
	st.Backoff = s.backoff
	return st, nil
}

// reportPending reports, every interval until ctx ends, how far the
// partitions' ends are ahead of this subtask's positions, summed: the
// autoscaler's backlog. It asks the brokers rather than waiting for
// fetches, because under back-pressure Emit blocks and fetches stop,
// which is when the backlog matters.
func (s *Source) reportPending(ctx context.Context, sctx sdk.Context, interval time.Duration) {
	adm := kadm.NewClient(s.admin)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var parts []*sourcePart
		if r := s.reading.Load(); r != nil {
			parts = *r
		}
		if len(parts) == 0 {
			sctx.ReportPending(sdk.Pending{Known: true})
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, interval)
		list := adm.ListEndOffsets
		if s.cfg.ReadCommitted {
			list = adm.ListCommittedOffsets // the last stable offsets
		}
		ends, err := list(lctx, sourceTopics(parts)...)
		cancel()
		if err != nil {
			continue // unknown this time: the last report stands
		}
		var n int64
		for _, p := range parts {
			e, ok := ends.Lookup(p.topic, p.partition)
			if !ok || e.Err != nil || p.finished.Load() {
				continue
			}
			end := e.Offset
			if stop := p.stopAt.Load(); stop >= 0 {
				end = min(end, stop) // bounded: what lies past the stop is not its to read
			}
			n += max(end-p.pos.Load(), 0)
		}
		sctx.ReportPending(sdk.Pending{Known: true, Records: n, Splits: len(parts)})
	}
}

// backlog is whether any partition is backlog-lag records or more behind
// its end; without backlog-lag the source does not tell.
func (s *Source) backlog() sdk.Backlog {
	if s.cfg.BacklogLag <= 0 || len(s.lags) == 0 {
		return sdk.BacklogUnknown
	}
	for _, lag := range s.lags {
		if lag >= s.cfg.BacklogLag {
			return sdk.ProcessingBacklog
		}
	}
	return sdk.NoBacklog
}

func sourceHeaders(hs []kgo.RecordHeader) []sdk.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]sdk.Header, len(hs))
	for i, h := range hs {
		out[i] = sdk.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// sourceSplit is the output of p: its own split of the watermark.
func sourceSplit(out sdk.Collector, so sdk.SourceOutput, p *sourcePart) sdk.Collector {
	if so == nil {
		return out
	}
	return so.Split(p.sourceTP.String())
}

// finish ends bounded partition p: it reached its stop offset.
func (s *Source) finish(p *sourcePart, so sdk.SourceOutput, finished *map[string][]int32) {
	p.done = true
	s.active--
	if so != nil {
		so.ReleaseSplit(p.sourceTP.String())
	}
	if *finished == nil {
		*finished = map[string][]int32{}
	}
	(*finished)[p.topic] = append((*finished)[p.topic], p.partition)
}

// fetchErrors fails on fetch errors a restart may fix or that need a
// human, and logs those the client recovers from itself.
func (s *Source) fetchErrors(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		var loss *kgo.ErrDataLoss
		switch {
		case errors.As(fe.Err, &loss):
			// The client reset the partition (to the earliest offset
			// left): records were lost on the broker, not here.
			s.log.Warn("kafka-source: data loss on the broker", "partition", sourceTP{fe.Topic, fe.Partition}.String(), "err", fe.Err)
		case errors.Is(fe.Err, kgo.ErrClientClosed):
			return fmt.Errorf("kafka-source: consumer closed")
		case kerr.IsRetriable(fe.Err):
			s.log.Warn("kafka-source: fetch failed, retrying", "partition", sourceTP{fe.Topic, fe.Partition}.String(), "err", fe.Err)
		default:
			return fmt.Errorf("kafka-source: fetch %s from %s: %w", sourceTP{fe.Topic, fe.Partition}, s.cfg.Servers, fe.Err)
		}
	}
	return nil
}

// SnapshotState stores every position: the runtime calls it right after
// the barrier went downstream, between two Emits, so the positions are
// exactly past the records before the barrier.
func (s *Source) SnapshotState(checkpointID int64) error {
	items := make([][]byte, 0, len(s.order)+len(s.unlisted))
	for _, p := range s.order {
		items = append(items, encodeSourcePosition(p))
	}
	for _, tp := range slices.SortedFunc(maps.Keys(s.unlisted), sourceCompareTP) {
		pos := s.unlisted[tp]
		items = append(items, encodeSourcePosition(&sourcePart{sourceTP: tp, next: pos.next, stop: pos.stop}))
	}
	s.state.Update(items)
	if s.pending != nil {
		o := make(kadm.Offsets)
		for _, p := range s.order {
			o.Add(kadm.Offset{Topic: p.topic, Partition: p.partition, At: p.next, LeaderEpoch: -1})
		}
		s.pending[checkpointID] = o
	}
	return nil
}

// NotifyCheckpointComplete commits the checkpoint's positions to
// group-id, in the background: they are for monitoring, and a slow broker
// must not hold the subtask up.
func (s *Source) NotifyCheckpointComplete(checkpointID int64) error {
	if s.pending == nil {
		return nil
	}
	o := s.pending[checkpointID]
	for id := range s.pending {
		if id <= checkpointID {
			delete(s.pending, id)
		}
	}
	if o == nil {
		return nil
	}
	s.commitMu.Lock()
	s.toCommit = o
	s.commitMu.Unlock()
	select {
	case s.commitWake <- struct{}{}:
	default:
	}
	return nil
}

func (s *Source) NotifyCheckpointAborted(checkpointID int64) error {
	delete(s.pending, checkpointID)
	return nil
}

// commitLoop commits the newest completed checkpoint's positions; an older
// one not committed yet is skipped.
func (s *Source) commitLoop(ctx context.Context) {
	adm := kadm.NewClient(s.admin)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.commitWake:
		}
		s.commitMu.Lock()
		o := s.toCommit
		s.toCommit = nil
		s.commitMu.Unlock()
		if o == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		resp, err := adm.CommitOffsets(cctx, s.cfg.Group, o)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("kafka-source: commit offsets (for monitoring only) failed", "group", s.cfg.Group, "err", err)
		}
	}
}

// discoverLoop looks for new partitions every partition-discovery-interval
// and hands the ones this subtask owns, positioned at their earliest
// offset (or at their restored one, for the unlisted at open), to Emit.
// known are the partitions this subtask already reads.
func (s *Source) discoverLoop(ctx context.Context, every time.Duration, known map[sourceTP]bool, unlisted map[sourceTP]sourcePosition) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		found, err := s.discover(ctx, known, unlisted)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("kafka-source: partition discovery failed", "err", err)
			}
			continue
		}
		if len(found) == 0 {
			continue
		}
		select {
		case s.found <- found:
			for _, p := range found {
				known[p.sourceTP] = true
			}
		case <-ctx.Done():
			return
		}
		if s.cfg.Discovery == 0 && allKnown(unlisted, known) {
			return // listed only for the unlisted, and every one is back
		}
	}
}

func allKnown(unlisted map[sourceTP]sourcePosition, known map[sourceTP]bool) bool {
	for tp := range unlisted {
		if !known[tp] {
			return false
		}
	}
	return true
}

func (s *Source) discover(ctx context.Context, known map[sourceTP]bool, unlisted map[sourceTP]sourcePosition) ([]*sourcePart, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	all, err := s.listPartitions(ctx)
	if err != nil {
		return nil, err
	}
	var found, fresh, unstopped []*sourcePart
	for _, tp := range all {
		if known[tp] || sourceOwner(tp, s.parallelism) != s.subtask {
			continue
		}
		p := &sourcePart{sourceTP: tp, stop: -1}
		pos, restored := unlisted[tp]
		switch {
		case restored:
			p.next = pos.next
			if s.cfg.Bounded {
				p.stop = pos.stop
			}
		case s.cfg.Bounded || s.cfg.Discovery == 0:
			continue // created after the first start (bounded), or not discovered
		default:
			fresh = append(fresh, p)
		}
		if s.cfg.Bounded && p.stop < 0 {
			unstopped = append(unstopped, p)
		}
		found = append(found, p)
	}
	if err := s.resolveStart(ctx, fresh, kafkacfg.StartEarliest); err != nil {
		return nil, err
	}
	if err := s.resolveStop(ctx, unstopped); err != nil {
		return nil, err
	}
	return found, nil
}

func (s *Source) Close() error {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	if s.consumer != nil {
		s.consumer.Close()
		s.consumer = nil
	}
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
	return nil
}

// A position item: version 1, next and stop (int64), partition (int32),
// then the topic.
const sourcePositionHeader = 1 + 8 + 8 + 4

func encodeSourcePosition(p *sourcePart) []byte {
	b := make([]byte, 0, sourcePositionHeader+len(p.topic))
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(p.next))
	b = binary.BigEndian.AppendUint64(b, uint64(p.stop))
	b = binary.BigEndian.AppendUint32(b, uint32(p.partition))
	return append(b, p.topic...)
}

type sourcePosition struct{ next, stop int64 }

func decodeSourcePositions(items [][]byte) (map[sourceTP]sourcePosition, error) {
	m := make(map[sourceTP]sourcePosition, len(items))
	for _, b := range items {
		if len(b) <= sourcePositionHeader || b[0] != 1 {
			return nil, fmt.Errorf("corrupt position item (%d bytes)", len(b))
		}
		tp := sourceTP{string(b[sourcePositionHeader:]), int32(binary.BigEndian.Uint32(b[17:]))}
		pos := sourcePosition{int64(binary.BigEndian.Uint64(b[1:])), int64(binary.BigEndian.Uint64(b[9:]))}
		if pos.next < 0 || tp.partition < 0 {
			return nil, fmt.Errorf("corrupt position item for %s (offset %d)", tp, pos.next)
		}
		if _, dup := m[tp]; dup {
			// Two subtasks read the same partition: exactly-once is off.
			return nil, fmt.Errorf("two positions for %s", tp)
		}
		m[tp] = pos
	}
	return m, nil
}

// sourceKgoLogger sends the client's warnings and errors (a broker that
// cannot be reached, say) to the subtask's log.
type sourceKgoLogger struct{ log *slog.Logger }

func (l sourceKgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l sourceKgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	case kgo.LogLevelInfo:
		lv = slog.LevelInfo
	}
	l.log.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}
