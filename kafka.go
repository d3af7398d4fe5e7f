package weir

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/kafka"
	"github.com/weirproject/weir/sdk"
)

// KafkaRecord is a Kafka record as the connectors see it: key, value,
// timestamp (the record's event time) and headers.
type KafkaRecord struct {
	Key, Value []byte
	Timestamp  time.Time
	Headers    []sdk.Header
}

// KafkaSource reads Kafka with the built-in kafka-source and decodes each
// record into a T. config is kafka-source's configuration, as in a job
// spec (bootstrap-servers, topic or topics or topic-pattern,
// starting-offsets, isolation, bounded, group-id, tls, sasl, …): the
// partitions are splits with their offsets in every checkpoint, and each
// partition is a split of the watermark. A decode error fails the
// subtask, naming the record.
func KafkaSource[T any](config map[string]any, decode func(KafkaRecord) (T, error)) Source[T] {
	return kafkaSource[T]{config: config, decode: decode}
}

type kafkaSource[T any] struct {
	config map[string]any
	decode func(KafkaRecord) (T, error)
}

func (k kafkaSource[T]) source(out *output[T]) (string, map[string]any, func() sdk.Source) {
	return fmt.Sprintf("kafka-source(%s)", typeName[T]()), withConnector(k.config, "kafka-source"), func() sdk.Source {
		return &kafkaDecoding[T]{Source: &kafka.Source{}, decode: k.decode, e: &emitter[T]{out: out}}
	}
}

// kafkaDecoding is kafka-source emitting decoded records: Emit's
// collector is wrapped (splits included) so each record is a T before it
// goes downstream.
type kafkaDecoding[T any] struct {
	*kafka.Source
	decode func(KafkaRecord) (T, error)
	e      *emitter[T]
	err    error
}

func (k *kafkaDecoding[T]) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	st, err := k.Source.Emit(k.wrap(out))
	if err == nil {
		err = k.err
	}
	return st, err
}

func (k *kafkaDecoding[T]) wrap(out sdk.Collector) sdk.Collector {
	d := decodingCollector[T]{k: k, out: out}
	if so, ok := out.(sdk.SourceOutput); ok {
		return decodingOutput[T]{decodingCollector: d, so: so}
	}
	return d
}

type decodingCollector[T any] struct {
	k   *kafkaDecoding[T]
	out sdk.Collector
}

func (c decodingCollector[T]) Collect(r sdk.Record) {
	if c.k.err != nil {
		return
	}
	v, err := c.k.decode(KafkaRecord{Key: r.Key, Value: r.Value, Timestamp: time.UnixMilli(r.Timestamp), Headers: r.Headers})
	if err != nil {
		c.k.err = fmt.Errorf("kafka-source: decode the record with key %q at %d: %w", r.Key, r.Timestamp, err)
		return
	}
	c.out.Collect(c.k.e.record(v, r.Timestamp))
}

type decodingOutput[T any] struct {
	decodingCollector[T]
	so sdk.SourceOutput
}

func (o decodingOutput[T]) Split(id string) sdk.Collector {
	return decodingCollector[T]{k: o.k, out: o.so.Split(id)}
}

func (o decodingOutput[T]) ReleaseSplit(id string) { o.so.ReleaseSplit(id) }

// KafkaSink writes the stream to Kafka with the built-in kafka-sink:
// config is its configuration, as in a job spec (bootstrap-servers,
// topic, topic-header, delivery: exactly-once with a
// transactional-id-prefix and a transaction-timeout, …), and encode makes
// each value's record (a zero Timestamp takes the broker's time).
func KafkaSink[T any](config map[string]any, encode func(T) KafkaRecord) Sink[T] {
	return kafkaSink[T]{config: config, encode: encode}
}

type kafkaSink[T any] struct {
	config map[string]any
	encode func(T) KafkaRecord
}

func (k kafkaSink[T]) sink(in Codec[T]) (string, map[string]any, func() sdk.Operator) {
	return fmt.Sprintf("kafka-sink(%s)", typeName[T]()), withConnector(k.config, "kafka-sink"), func() sdk.Operator {
		return &kafkaEncoding[T]{Sink: &kafka.Sink{}, in: in, encode: k.encode}
	}
}

// kafkaEncoding is kafka-sink fed encoded records.
type kafkaEncoding[T any] struct {
	*kafka.Sink
	in     Codec[T]
	encode func(T) KafkaRecord
}

func (k *kafkaEncoding[T]) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := k.in.Decode(r.Value)
	if err != nil {
		return fmt.Errorf("kafka-sink: decode %s: %w", typeName[T](), err)
	}
	kr := k.encode(v)
	rec := sdk.Record{Key: kr.Key, Value: kr.Value, Headers: kr.Headers}
	if !kr.Timestamp.IsZero() {
		rec.Timestamp = kr.Timestamp.UnixMilli()
	}
	return k.Sink.ProcessRecord(rec, out)
}

// withConnector is config naming the built-in connector, so the job
// graph's checks of it (and the JobManager's) apply.
func withConnector(config map[string]any, connector string) map[string]any {
	out := map[string]any{jobgraph.ConnectorKey: connector}
	for k, v := range config {
		out[k] = v
	}
	return out
}
