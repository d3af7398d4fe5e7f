// Package exchange moves records and events between subtasks: bounded
// subpartition queues on the producer side, input channels on the consumer
// side, in memory within a TaskManager and over a gRPC stream with
// credit-based flow control between TaskManagers. Nothing here grows without
// bound: a producer takes no new work while a subpartition is full (see
// Subpartition), a write blocks at capacity plus a small overdraft, and a
// remote producer sends only as many buffers as the consumer granted
// credits for. Only events, which are few, pass a full queue; priority
// events (unaligned barriers) also overtake the buffers queued before them,
// and report those, which become a checkpoint's channel state.
package exchange

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Kind says what a Buffer carries.
type Kind uint8

const (
	KindRecords Kind = iota
	KindBarrier
	KindCancelMarker
	KindEndOfData
	KindEndOfPartition
	// KindWatermark carries Watermark: event time has reached it.
	KindWatermark
	// KindWatermarkStatus carries Idle: the producer stopped (or resumed)
	// holding back its consumers' watermark.
	KindWatermarkStatus
)

func (k Kind) String() string {
	switch k {
	case KindRecords:
		return "records"
	case KindBarrier:
		return "barrier"
	case KindCancelMarker:
		return "cancel-marker"
	case KindEndOfData:
		return "end-of-data"
	case KindEndOfPartition:
		return "end-of-partition"
	case KindWatermark:
		return "watermark"
	case KindWatermarkStatus:
		return "watermark-status"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Buffer is the unit a channel carries: a batch of records or one event.
type Buffer struct {
	Kind    Kind
	Records []sdk.Record
	// Barrier is set for KindBarrier.
	Barrier *weirv1.CheckpointBarrier
	// CheckpointID is set for KindCancelMarker.
	CheckpointID int64
	// Watermark is set for KindWatermark (milliseconds of event time).
	Watermark int64
	// Idle is set for KindWatermarkStatus.
	Idle bool
	// Priority marks an event that overtook the buffers queued before it:
	// the barrier of an unaligned checkpoint. It needs no credit and is
	// never blocked by a full queue.
	Priority bool
	// Overtaken is set on a priority buffer polled from an input channel
	// that held data buffers of its own when the event arrived (a remote
	// channel's receive queue): those buffers were sent before the event
	// but are delivered after it. They are copies for the consumer to
	// record as channel state; the buffers themselves still follow.
	Overtaken []Buffer
}

// Size is the payload size of a records buffer in bytes (keys, values and
// timestamps); events count as zero.
func (b Buffer) Size() int64 {
	var n int64
	for _, r := range b.Records {
		n += int64(len(r.Key) + len(r.Value) + 8)
	}
	return n
}

// ToProto converts b for the wire. A records batch is one packed payload,
// allocated per message: gRPC does not promise it is done with a sent
// message when Send returns, so the payload is never reused.
func (b Buffer) ToProto() *weirv1.ExchangeMessage {
	m := &weirv1.ExchangeMessage{Priority: b.Priority}
	switch b.Kind {
	case KindRecords:
		headers := HasHeaders(b.Records)
		m.Kind = &weirv1.ExchangeMessage_Packed{Packed: &weirv1.PackedRecords{
			Data: AppendRecords(nil, b.Records, headers), Count: int32(len(b.Records)), Headers: headers,
		}}
	case KindBarrier:
		m.Kind = &weirv1.ExchangeMessage_Barrier{Barrier: b.Barrier}
	case KindCancelMarker:
		m.Kind = &weirv1.ExchangeMessage_Cancel{Cancel: &weirv1.CancelCheckpointMarker{CheckpointId: b.CheckpointID}}
	case KindEndOfData:
		m.Kind = &weirv1.ExchangeMessage_EndOfData{EndOfData: &weirv1.EndOfData{}}
	case KindEndOfPartition:
		m.Kind = &weirv1.ExchangeMessage_EndOfPartition{EndOfPartition: &weirv1.EndOfPartition{}}
	case KindWatermark:
		m.Kind = &weirv1.ExchangeMessage_Watermark{Watermark: &weirv1.Watermark{TimestampMs: b.Watermark}}
	case KindWatermarkStatus:
		m.Kind = &weirv1.ExchangeMessage_WatermarkStatus{WatermarkStatus: &weirv1.WatermarkStatus{Idle: b.Idle}}
	}
	return m
}

// HasHeaders says whether any of recs has headers: only then does a
// batch carry them.
func HasHeaders(recs []sdk.Record) bool {
	for _, r := range recs {
		if len(r.Headers) > 0 {
			return true
		}
	}
	return false
}

// AppendRecords appends recs in the PackedRecords layout, with their
// headers when headers is set (and dropping them otherwise).
func AppendRecords(dst []byte, recs []sdk.Record, headers bool) []byte {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value) + 2 + binary.MaxVarintLen64
		if headers {
			n++
			for _, h := range r.Headers {
				n += len(h.Key) + len(h.Value) + 2*binary.MaxVarintLen64
			}
		}
	}
	dst = slices.Grow(dst, n)
	for _, r := range recs {
		dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
		dst = append(dst, r.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(r.Value)))
		dst = append(dst, r.Value...)
		dst = binary.AppendVarint(dst, r.Timestamp)
		if headers {
			dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
			for _, h := range r.Headers {
				dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
				dst = append(dst, h.Key...)
				dst = binary.AppendUvarint(dst, uint64(len(h.Value)))
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst
}

// DecodeRecords decodes count records in the PackedRecords layout. Keys,
// values and header values point into data, which the records then own.
func DecodeRecords(data []byte, count int, headers bool) ([]sdk.Record, error) {
	// Each record takes at least a byte per length and one for its
	// timestamp (and its header count): a count the data cannot hold
	// fails here rather than allocating for it.
	least := 3
	if headers {
		least++
	}
	if count < 0 || count > len(data)/least {
		return nil, fmt.Errorf("exchange: packed records: bad count %d for %d bytes", count, len(data))
	}
	recs := GetRecords(count)[:count]
	for i := range recs {
		var err error
		var key, value []byte
		if key, data, err = cutBytes(data); err != nil {
			return nil, err
		}
		if value, data, err = cutBytes(data); err != nil {
			return nil, err
		}
		ts, n := binary.Varint(data)
		if n <= 0 {
			return nil, errPacked
		}
		data = data[n:]
		recs[i] = sdk.Record{Key: key, Value: value, Timestamp: ts}
		if headers {
			if recs[i].Headers, data, err = cutHeaders(data); err != nil {
				return nil, err
			}
		}
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("exchange: packed records: %d bytes after the last record", len(data))
	}
	return recs, nil
}

var errPacked = fmt.Errorf("exchange: packed records: truncated or corrupt")

// cutHeaders splits a record's headers off data.
func cutHeaders(data []byte) ([]sdk.Header, []byte, error) {
	count, n := binary.Uvarint(data)
	// Each header takes at least two bytes: a bad count fails here
	// rather than allocating.
	if n <= 0 || count > uint64(len(data)-n)/2 {
		return nil, nil, errPacked
	}
	data = data[n:]
	if count == 0 {
		return nil, data, nil
	}
	hs := make([]sdk.Header, count)
	for i := range hs {
		var key []byte
		var err error
		if key, data, err = cutBytes(data); err != nil {
			return nil, nil, err
		}
		if hs[i].Value, data, err = cutBytes(data); err != nil {
			return nil, nil, err
		}
		hs[i].Key = string(key)
	}
	return hs, data, nil
}

// cutBytes splits a uvarint-length-prefixed byte string off data; the
// string is capped so that appending to it never writes into the next.
func cutBytes(data []byte) (b, rest []byte, err error) {
	l, n := binary.Uvarint(data)
	if n <= 0 || l > uint64(len(data)-n) {
		return nil, nil, errPacked
	}
	end := n + int(l)
	if l == 0 {
		return nil, data[end:], nil
	}
	return data[n:end:end], data[end:], nil
}

// FromProto converts a message received from the wire.
func FromProto(m *weirv1.ExchangeMessage) (Buffer, error) {
	b, err := fromProto(m)
	b.Priority = m.GetPriority()
	return b, err
}

func fromProto(m *weirv1.ExchangeMessage) (Buffer, error) {
	switch k := m.GetKind().(type) {
	case *weirv1.ExchangeMessage_Packed:
		recs, err := DecodeRecords(k.Packed.GetData(), int(k.Packed.GetCount()), k.Packed.GetHeaders())
		if err != nil {
			return Buffer{}, err
		}
		return Buffer{Kind: KindRecords, Records: recs}, nil
	case *weirv1.ExchangeMessage_Batch:
		recs := make([]sdk.Record, len(k.Batch.GetRecords()))
		for i, r := range k.Batch.GetRecords() {
			recs[i] = sdk.Record{Key: r.GetKey(), Value: r.GetValue(), Timestamp: r.GetTimestamp(), Headers: state.HeadersFromProto(r.GetHeaders())}
		}
		return Buffer{Kind: KindRecords, Records: recs}, nil
	case *weirv1.ExchangeMessage_Barrier:
		return Buffer{Kind: KindBarrier, Barrier: k.Barrier}, nil
	case *weirv1.ExchangeMessage_Cancel:
		return Buffer{Kind: KindCancelMarker, CheckpointID: k.Cancel.GetCheckpointId()}, nil
	case *weirv1.ExchangeMessage_EndOfData:
		return Buffer{Kind: KindEndOfData}, nil
	case *weirv1.ExchangeMessage_EndOfPartition:
		return Buffer{Kind: KindEndOfPartition}, nil
	case *weirv1.ExchangeMessage_Watermark:
		return Buffer{Kind: KindWatermark, Watermark: k.Watermark.GetTimestampMs()}, nil
	case *weirv1.ExchangeMessage_WatermarkStatus:
		return Buffer{Kind: KindWatermarkStatus, Idle: k.WatermarkStatus.GetIdle()}, nil
	}
	return Buffer{}, fmt.Errorf("exchange: message without a kind")
}
