package exchange

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Metrics counts what a TaskManager's remote channels carry, per
// TaskManager: the exchange is shared by all its subtasks and the wire
// cost per record is a property of the batches, not of one subtask.
// In-process (local) channels send nothing over the wire and are not
// counted. A nil *Metrics counts nothing.
type Metrics struct {
	sentMessages, sentBytes, sentRecords prometheus.Counter
	recvMessages, recvBytes, recvRecords prometheus.Counter
}

// NewMetrics registers the exchange metrics on reg (none when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		sentMessages: c("weir_exchange_sent_messages_total", "Exchange messages (record batches and events) this TaskManager sent to remote consumers."),
		sentBytes:    c("weir_exchange_sent_bytes_total", "Protobuf-encoded size of the exchange messages this TaskManager sent to remote consumers."),
		sentRecords:  c("weir_exchange_sent_records_total", "Records this TaskManager sent to remote consumers."),
		recvMessages: c("weir_exchange_received_messages_total", "Exchange messages this TaskManager's remote input channels received."),
		recvBytes:    c("weir_exchange_received_bytes_total", "Protobuf-encoded size of the exchange messages this TaskManager's remote input channels received."),
		recvRecords:  c("weir_exchange_received_records_total", "Records this TaskManager's remote input channels received."),
	}
	if reg != nil {
		reg.MustRegister(m.sentMessages, m.sentBytes, m.sentRecords, m.recvMessages, m.recvBytes, m.recvRecords)
	}
	return m
}

func (m *Metrics) sent(msg *weirv1.ExchangeMessage, records int) {
	if m == nil {
		return
	}
	m.sentMessages.Inc()
	m.sentBytes.Add(float64(proto.Size(msg)))
	m.sentRecords.Add(float64(records))
}

func (m *Metrics) received(msg *weirv1.ExchangeMessage, records int) {
	if m == nil {
		return
	}
	m.recvMessages.Inc()
	m.recvBytes.Add(float64(proto.Size(msg)))
	m.recvRecords.Add(float64(records))
}
