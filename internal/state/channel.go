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

// ErrChannelStateRescale is returned when in-flight records cannot be
// split across a new number of subtasks or channels: only those on a
// broadcast edge, where each consumer had its own copy and its own place
// in the stream.
var ErrChannelStateRescale = errors.New("channel state cannot be split across the new parallelism")

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

// RestoreChannelState returns the channel state the subtask d describes
// restores from prev, every subtask state of its vertex in the restored
// checkpoint, laid out on d's channels; nil when it has none. When the
// vertex kept its parallelism and its producers and consumers theirs, that
// is the subtask's own channel state as written; otherwise the in-flight
// records are redistributed (see redistribute).
func RestoreChannelState(fs vfs.FS, prev []*weirv1.SubtaskState, d *weirv1.TaskDeploymentDescriptor) (*weirv1.ChannelStateSnapshot, error) {
	subtask, parallelism := int(d.GetAttempt().GetSubtaskIndex()), int(d.GetParallelism())
	var old []oldChannels
	oldParallelism := 0
	for _, st := range prev {
		if !storage.HasState(st.GetChannelState()) {
			continue
		}
		if oldParallelism != 0 && int(st.GetParallelism()) != oldParallelism {
			return nil, fmt.Errorf("state: restore channel state of %s: subtask states written at parallelism %d and %d", st.GetVertex(), oldParallelism, st.GetParallelism())
		}
		oldParallelism = int(st.GetParallelism())
		// At the same parallelism only the subtask's own records are its
		// to restore: reading the others' would cost a read per subtask.
		if oldParallelism == parallelism && int(st.GetSubtaskIndex()) != subtask {
			continue
		}
		old = append(old, oldChannels{st: st})
	}
	if len(old) == 0 {
		return nil, nil
	}
	r := newRestorer(fs)
	for i := range old {
		old[i].cs = &weirv1.ChannelStateSnapshot{}
		if err := r.readHandle(old[i].st.GetChannelState(), old[i].cs); err != nil {
			return nil, fmt.Errorf("state: restore channel state: %w", err)
		}
	}
	if oldParallelism == parallelism && fits(old[0].cs, d) {
		return old[0].cs, nil
	}
	return redistribute(old, oldParallelism == parallelism, d)
}

// fits reports whether cs was written for d's channels: every producer
// and consumer kept its parallelism.
func fits(cs *weirv1.ChannelStateSnapshot, d *weirv1.TaskDeploymentDescriptor) bool {
	for _, in := range cs.GetInputs() {
		g := int(in.GetGate())
		if g < 0 || g >= len(d.GetInputs()) || int(in.GetNumChannels()) != len(d.GetInputs()[g].GetChannels()) {
			return false
		}
	}
	for _, out := range cs.GetOutputs() {
		p := int(out.GetPartition())
		if p < 0 || p >= len(d.GetOutputs()) || out.GetNumSubpartitions() != d.GetOutputs()[p].GetNumSubpartitions() {
			return false
		}
	}
	return true
}

// ChannelStateRecords counts the records in cs.
func ChannelStateRecords(cs *weirv1.ChannelStateSnapshot) int {
	n := 0
	for _, in := range cs.GetInputs() {
		n += countRecords(in.GetBatches())
	}
	for _, out := range cs.GetOutputs() {
		n += countRecords(out.GetBatches())
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
