// Package kafka reads and writes Kafka from a Go job: Source decodes each
// record into a typed value, Sink encodes typed values into records,
// exactly once. Both run the built-in kafka-source and kafka-sink (the
// same code, checks and metrics as in a YAML job spec), configured by
// SourceConfig and SinkConfig, whose fields are the spec's keys.
package kafka

import (
	"fmt"
	"strings"
	"time"

	"github.com/weirproject/weir"
	kafkart "github.com/weirproject/weir/internal/kafka"
	"github.com/weirproject/weir/sdk"
)

// Record is a Kafka record as the connectors see it: key, value,
// timestamp (the record's event time) and headers.
type Record struct {
	Key, Value []byte
	Timestamp  time.Time
	Headers    []sdk.Header
}

// Connection is how a source or sink reaches the brokers.
type Connection struct {
	// Brokers are the bootstrap servers, host:port (bootstrap-servers).
	Brokers []string
	// TLS to the brokers; nil: plaintext.
	TLS *TLS
	// SASL authentication; nil: none.
	SASL *SASL
	// OpenTimeout is how long unreachable brokers or missing topics may
	// keep a subtask from starting before it fails (open-timeout; zero:
	// 10 s).
	OpenTimeout time.Duration
}

// TLS names PEM files, each optional (a client certificate needs its key).
type TLS struct{ CA, Cert, Key string }

// SASL authenticates with Mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
type SASL struct{ Mechanism, Username, Password string }

func (c Connection) config(connector string) map[string]any {
	m := map[string]any{weir.ConnectorKey: connector, "bootstrap-servers": strings.Join(c.Brokers, ",")}
	if c.TLS != nil {
		m["tls"] = map[string]any{"ca": c.TLS.CA, "cert": c.TLS.Cert, "key": c.TLS.Key}
	}
	if c.SASL != nil {
		m["sasl"] = map[string]any{"mechanism": c.SASL.Mechanism, "username": c.SASL.Username, "password": c.SASL.Password}
	}
	setDuration(m, "open-timeout", c.OpenTimeout)
	return m
}

func setDuration(m map[string]any, key string, d time.Duration) {
	if d != 0 {
		m[key] = d.String()
	}
}

func setString(m map[string]any, key, v string) {
	if v != "" {
		m[key] = v
	}
}

// SourceConfig configures a Source (kafka-source's keys).
type SourceConfig struct {
	Connection
	// One of Topic, Topics and TopicPattern (a regular expression).
	Topic        string
	Topics       []string
	TopicPattern string
	// GroupID is the consumer group offsets are committed to after each
	// completed checkpoint, for monitoring only.
	GroupID string
	// StartingOffsets is where a first start reads: "earliest" (the
	// default), "latest", "committed" (needs GroupID) or "timestamp:<ms>".
	// A restore reads from its checkpoint.
	StartingOffsets string
	// ReadUncommitted reads records of open and aborted transactions too.
	ReadUncommitted bool
	// PartitionDiscoveryInterval is how often new partitions (and topics
	// of a pattern) are looked for; zero: never.
	PartitionDiscoveryInterval time.Duration
	// Bounded stops at the offsets found at the first start.
	Bounded bool
	// BacklogLag reports a backlog while a partition is this many records
	// behind (zero: never).
	BacklogLag int64
}

func (c SourceConfig) config() map[string]any {
	m := c.Connection.config("kafka-source")
	setString(m, "topic", c.Topic)
	if len(c.Topics) > 0 {
		topics := make([]any, len(c.Topics))
		for i, t := range c.Topics {
			topics[i] = t
		}
		m["topics"] = topics
	}
	setString(m, "topic-pattern", c.TopicPattern)
	setString(m, "group-id", c.GroupID)
	setString(m, "starting-offsets", c.StartingOffsets)
	if c.ReadUncommitted {
		m["isolation"] = "read-uncommitted"
	}
	setDuration(m, "partition-discovery-interval", c.PartitionDiscoveryInterval)
	if c.Bounded {
		m["bounded"] = "latest"
	}
	if c.BacklogLag != 0 {
		m["backlog-lag"] = float64(c.BacklogLag)
	}
	return m
}

// Source reads Kafka and decodes each record into a T: the partitions are
// splits with their offsets in every checkpoint, and each partition is a
// split of the watermark. A decode error fails the subtask, naming the
// record.
func Source[T any](cfg SourceConfig, decode func(Record) (T, error)) weir.Source[T] {
	return source[T]{cfg: cfg, decode: decode}
}

type source[T any] struct {
	cfg    SourceConfig
	decode func(Record) (T, error)
}

func (k source[T]) SourceVertex(records weir.Records[T]) weir.SourceVertex {
	return weir.SourceVertex{
		Signature: fmt.Sprintf("kafka-source(%s)", weir.TypeName[T]()),
		Config:    k.cfg.config(),
		New: func() sdk.Source {
			return &decoding[T]{Source: &kafkart.Source{}, decode: k.decode, e: records.Encoder()}
		},
	}
}

// decoding is kafka-source emitting decoded records: Emit's collector is
// wrapped (splits included) so each record is a T before it goes
// downstream.
type decoding[T any] struct {
	*kafkart.Source
	decode func(Record) (T, error)
	e      *weir.Encoder[T]
	err    error
}

func (k *decoding[T]) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	st, err := k.Source.Emit(k.wrap(out))
	if err == nil {
		err = k.err
	}
	return st, err
}

func (k *decoding[T]) wrap(out sdk.Collector) sdk.Collector {
	d := decodingCollector[T]{k: k, out: out}
	if so, ok := out.(sdk.SourceOutput); ok {
		return decodingOutput[T]{decodingCollector: d, so: so}
	}
	return d
}

type decodingCollector[T any] struct {
	k   *decoding[T]
	out sdk.Collector
}

func (c decodingCollector[T]) Collect(r sdk.Record) {
	if c.k.err != nil {
		return
	}
	v, err := c.k.decode(Record{Key: r.Key, Value: r.Value, Timestamp: time.UnixMilli(r.Timestamp), Headers: r.Headers})
	if err != nil {
		c.k.err = fmt.Errorf("kafka-source: decode the record with key %q at %d: %w", r.Key, r.Timestamp, err)
		return
	}
	c.out.Collect(c.k.e.Record(v, weir.Time(r.Timestamp)))
}

type decodingOutput[T any] struct {
	decodingCollector[T]
	so sdk.SourceOutput
}

func (o decodingOutput[T]) Split(id string) sdk.Collector {
	return decodingCollector[T]{k: o.k, out: o.so.Split(id)}
}

func (o decodingOutput[T]) ReleaseSplit(id string) { o.so.ReleaseSplit(id) }

// Delivery is what a Sink promises.
type Delivery string

const (
	// ExactlyOnce: Kafka transactions committed with checkpoints (needs
	// TransactionalIDPrefix).
	ExactlyOnce Delivery = "exactly-once"
	// AtLeastOnce: flushed at every checkpoint; a restore writes again.
	AtLeastOnce Delivery = "at-least-once"
	// None: written as it comes.
	None Delivery = "none"
)

// SinkConfig configures a Sink (kafka-sink's keys).
type SinkConfig struct {
	Connection
	// Topic is the topic written.
	Topic string
	// TopicHeader: a record carrying this header goes to the topic it
	// names (the header is not written).
	TopicHeader string
	// Delivery defaults to ExactlyOnce.
	Delivery Delivery
	// TransactionalIDPrefix is required for ExactlyOnce; one running job
	// at a time may use a prefix.
	TransactionalIDPrefix string
	// TransactionTimeout: the brokers abort a transaction older than this
	// (zero: 15 min). It must exceed the checkpoint timeout plus the
	// restart strategy's longest delay.
	TransactionTimeout time.Duration
	// TransactionMaxAge is the longest the sink carries an uncommitted
	// transaction before it fails over (zero: half the timeout).
	TransactionMaxAge time.Duration
}

func (c SinkConfig) config() map[string]any {
	m := c.Connection.config("kafka-sink")
	setString(m, "topic", c.Topic)
	setString(m, "topic-header", c.TopicHeader)
	setString(m, "delivery", string(c.Delivery))
	setString(m, "transactional-id-prefix", c.TransactionalIDPrefix)
	setDuration(m, "transaction-timeout", c.TransactionTimeout)
	setDuration(m, "transaction-max-age", c.TransactionMaxAge)
	return m
}

// Sink writes the stream to Kafka; encode makes each value's record (a
// zero Timestamp takes the broker's time). The configuration is checked
// when the job is built, as a job spec's is.
func Sink[T any](cfg SinkConfig, encode func(T) Record) weir.Sink[T] {
	return sink[T]{cfg: cfg, encode: encode}
}

type sink[T any] struct {
	cfg    SinkConfig
	encode func(T) Record
}

func (k sink[T]) SinkVertex(in weir.Codec[T]) weir.SinkVertex {
	return weir.SinkVertex{
		Signature: fmt.Sprintf("kafka-sink(%s)", weir.TypeName[T]()),
		Config:    k.cfg.config(),
		New: func() sdk.Operator {
			return &encoding[T]{Sink: &kafkart.Sink{}, in: in, encode: k.encode}
		},
	}
}

// encoding is kafka-sink fed encoded records.
type encoding[T any] struct {
	*kafkart.Sink
	in     weir.Codec[T]
	encode func(T) Record
}

func (k *encoding[T]) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := k.in.Decode(r.Value)
	if err != nil {
		return fmt.Errorf("kafka-sink: decode %s: %w", weir.TypeName[T](), err)
	}
	kr := k.encode(v)
	rec := sdk.Record{Key: kr.Key, Value: kr.Value, Headers: kr.Headers}
	if !kr.Timestamp.IsZero() {
		rec.Timestamp = kr.Timestamp.UnixMilli()
	}
	return k.Sink.ProcessRecord(rec, out)
}
