package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// ErrChannelStateRescale is returned when channel state would have to be
// split across a different number of subtasks or channels: in-flight
// records belong to one channel between two particular subtasks, so an
// unaligned checkpoint restores only at the parallelism it was taken at.
var ErrChannelStateRescale = errors.New("state: channel state of an unaligned checkpoint can only be restored at the same parallelism")

// WriteChannelState is the asynchronous part of a subtask's channel state:
// it writes cs into dir as <vertex>-<subtask>.channel, or inline when
// smaller than inlineThreshold bytes, and returns its handle; nil when cs
// holds no records (nothing was in flight).
func WriteChannelState(fs vfs.FS, dir, vertex string, subtask int, cs *weirv1.ChannelStateSnapshot, inlineThreshold int) (*weirv1.StateHandle, error) {
	if ChannelStateRecords(cs) == 0 {
		return nil, nil
	}
	path := blob.Join(dir, fmt.Sprintf("%s-%d.channel", vertex, subtask))
	h, err := storage.Files{FS: fs}.WriteHandle(path, cs, inlineThreshold)
	if err != nil {
		return nil, fmt.Errorf("state: write channel state: %w", err)
	}
	return h, nil
}

// RestoreChannelState returns the channel state subtask (of parallelism
// subtasks) restores from prev, every subtask state of its vertex in the
// restored checkpoint; nil when it has none. A checkpoint whose vertex ran
// at another parallelism and holds channel state is refused.
func RestoreChannelState(fs vfs.FS, prev []*weirv1.SubtaskState, subtask, parallelism int) (*weirv1.ChannelStateSnapshot, error) {
	var mine *weirv1.SubtaskState
	for _, st := range prev {
		if !storage.HasState(st.GetChannelState()) {
			continue
		}
		if int(st.GetParallelism()) != parallelism {
			return nil, fmt.Errorf("%w: vertex %s had parallelism %d with records in flight, it now has %d",
				ErrChannelStateRescale, st.GetVertex(), st.GetParallelism(), parallelism)
		}
		if int(st.GetSubtaskIndex()) == subtask {
			mine = st
		}
	}
	if mine == nil {
		return nil, nil
	}
	cs := &weirv1.ChannelStateSnapshot{}
	if err := newRestorer(fs).readHandle(mine.GetChannelState(), cs); err != nil {
		return nil, fmt.Errorf("state: restore channel state: %w", err)
	}
	return cs, nil
}

// ChannelStateRecords counts the records in cs.
func ChannelStateRecords(cs *weirv1.ChannelStateSnapshot) int {
	n := 0
	for _, in := range cs.GetInputs() {
		for _, b := range in.GetBatches() {
			n += len(b.GetRecords())
		}
	}
	for _, out := range cs.GetOutputs() {
		for _, b := range out.GetBatches() {
			n += len(b.GetRecords())
		}
	}
	return n
}

// InFlightBatch converts records to their channel state form.
func InFlightBatch(recs []sdk.Record) *weirv1.InFlightBatch {
	b := &weirv1.InFlightBatch{Records: make([]*weirv1.InFlightRecord, len(recs))}
	for i, r := range recs {
		b.Records[i] = &weirv1.InFlightRecord{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: HeadersToProto(r.Headers)}
	}
	return b
}

// Records converts a channel state batch back to records.
func Records(b *weirv1.InFlightBatch) []sdk.Record {
	recs := make([]sdk.Record, len(b.GetRecords()))
	for i, r := range b.GetRecords() {
		recs[i] = sdk.Record{Key: r.GetKey(), Value: r.GetValue(), Timestamp: r.GetTimestamp(), Headers: HeadersFromProto(r.GetHeaders())}
	}
	return recs
}

// HeadersToProto converts record headers for a message.
func HeadersToProto(hs []sdk.Header) []*weirv1.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]*weirv1.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = &weirv1.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}

// HeadersFromProto converts record headers from a message.
func HeadersFromProto(hs []*weirv1.RecordHeader) []sdk.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]sdk.Header, len(hs))
	for i, h := range hs {
		out[i] = sdk.Header{Key: h.GetKey(), Value: h.GetValue()}
	}
	return out
}
