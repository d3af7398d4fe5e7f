package state

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// fuzzChannelState is an unaligned checkpoint's channel state as a subtask
// records it: records read on two input channels, output its barrier
// overtook, headers, empty keys and values, negative timestamps.
func fuzzChannelState() *weirv1.ChannelStateSnapshot {
	in := []sdk.Record{
		{Key: []byte("k1"), Value: []byte("1"), Timestamp: 7},
		{Key: nil, Value: []byte("no key"), Timestamp: -1},
		{Key: []byte("k2"), Value: nil, Headers: []sdk.Header{{Key: "trace", Value: []byte("abc")}, {Key: "", Value: nil}}},
	}
	out := []sdk.Record{{Key: []byte("sum"), Value: []byte("42"), Timestamp: 1 << 40}}
	return &weirv1.ChannelStateSnapshot{
		Inputs: []*weirv1.InputChannelState{
			{Gate: 0, Channel: 1, NumChannels: 2, SourceVertex: "source", Batches: []*weirv1.InFlightBatch{InFlightBatch(in), InFlightBatch(in[:1])}},
			{Gate: 1, Channel: 0, NumChannels: 1, SourceVertex: "right", Batches: []*weirv1.InFlightBatch{InFlightBatch(in[2:])}},
		},
		Outputs: []*weirv1.ResultSubpartitionState{
			{Partition: 0, Subpartition: 1, NumSubpartitions: 2, TargetVertex: "sink", Batches: []*weirv1.InFlightBatch{InFlightBatch(out)}},
		},
	}
}

// fuzzDescriptor is subtask 0 of 2 with the channels of fuzzChannelState.
func fuzzDescriptor() *weirv1.TaskDeploymentDescriptor {
	return descriptor("sum", 0, 2, []gate{{"source", hash, 2}, {"right", hash, 1}}, []output{{"sink", hash, 2}})
}

// FuzzRestoreChannelState decodes arbitrary channel state the way a
// restored subtask does, inline in its deployment or from its file, and
// converts every batch back to records: a corrupt file must be an error,
// never a panic in the TaskManager.
func FuzzRestoreChannelState(f *testing.F) {
	dir := f.TempDir()
	for i, cs := range []*weirv1.ChannelStateSnapshot{fuzzChannelState(), {Inputs: []*weirv1.InputChannelState{{Batches: []*weirv1.InFlightBatch{InFlightBatch([]sdk.Record{{Key: []byte("k")}})}}}}} {
		// The bytes WriteChannelState stores, in a file and inline.
		h, err := WriteChannelState(nil, dir, "sum", i, cs, 0)
		if err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(h.GetPath())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
		f.Add(data, true)
		f.Add(data[:len(data)/2], true)
		h, err = WriteChannelState(nil, dir, "sum", i, cs, storage.DefaultInlineThreshold)
		if err != nil {
			f.Fatal(err)
		}
		if len(h.GetInlineData()) == 0 {
			f.Fatalf("channel state %d was not inlined", i)
		}
		f.Add(h.GetInlineData(), true)
	}
	f.Add([]byte{}, true)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, true)
	f.Fuzz(func(t *testing.T, data []byte, inline bool) {
		h := &weirv1.StateHandle{InlineData: data, Size: int64(len(data))}
		if !inline {
			h = &weirv1.StateHandle{Path: filepath.Join(t.TempDir(), "sum-0.channel"), Size: int64(len(data))}
			if err := os.WriteFile(h.GetPath(), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		prev := []*weirv1.SubtaskState{
			{Vertex: "sum", SubtaskIndex: 0, Parallelism: 2, ChannelState: h},
			{Vertex: "sum", SubtaskIndex: 1, Parallelism: 2},
		}
		cs, err := RestoreChannelState(nil, prev, fuzzDescriptor())
		if err != nil {
			if errors.Is(err, ErrChannelStateRescale) {
				t.Fatalf("same parallelism refused as a rescale: %v", err)
			}
			return
		}
		if !storage.HasState(h) {
			if cs != nil {
				t.Fatalf("channel state %v restored from an empty handle", cs)
			}
			return
		}
		// cs may be nil: state with no records restores nothing.
		var batches []*weirv1.InFlightBatch
		for _, in := range cs.GetInputs() {
			batches = append(batches, in.GetBatches()...)
		}
		for _, out := range cs.GetOutputs() {
			batches = append(batches, out.GetBatches()...)
		}
		n := 0
		for _, b := range batches {
			recs := Records(b)
			n += len(recs)
			// Records and InFlightBatch are inverses: a restored subtask
			// replays what was recorded.
			for i, r := range InFlightBatch(recs).GetRecords() {
				if !proto.Equal(r, stripUnknown(b.GetRecords()[i])) {
					t.Fatalf("record %d does not round-trip\n got: %v\nwant: %v", i, r, b.GetRecords()[i])
				}
			}
		}
		if got := ChannelStateRecords(cs); got != n {
			t.Fatalf("ChannelStateRecords = %d, the batches hold %d", got, n)
		}
	})
}

// stripUnknown is r without the fields this version does not know, which
// the conversion to records drops, and with its headers as the
// conversion writes them.
func stripUnknown(r *weirv1.InFlightRecord) *weirv1.InFlightRecord {
	out := &weirv1.InFlightRecord{Key: r.GetKey(), Value: r.GetValue(), Timestamp: r.GetTimestamp()}
	for _, h := range r.GetHeaders() {
		out.Headers = append(out.Headers, &weirv1.RecordHeader{Key: h.GetKey(), Value: h.GetValue()})
	}
	return out
}
