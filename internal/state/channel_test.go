package state

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// Channel state round-trips through its file, or inline, and comes back to
// the subtask that wrote it; nothing is written when nothing was in flight.
func TestChannelStateRoundTrip(t *testing.T) {
	t.Run("file", func(t *testing.T) { testChannelStateRoundTrip(t, 0) })
	t.Run("inline", func(t *testing.T) { testChannelStateRoundTrip(t, storage.DefaultInlineThreshold) })
}

func testChannelStateRoundTrip(t *testing.T, inline int) {
	dir := t.TempDir()
	recs := []sdk.Record{{Key: []byte("k1"), Value: []byte("1"), Timestamp: 7}, {Key: []byte("k2"), Value: []byte("2")}}
	cs := &weirv1.ChannelStateSnapshot{
		Inputs:  []*weirv1.InputChannelState{{Gate: 0, Channel: 1, NumChannels: 2, SourceVertex: "source", Batches: []*weirv1.InFlightBatch{InFlightBatch(recs)}}},
		Outputs: []*weirv1.ResultSubpartitionState{{Partition: 0, Subpartition: 1, NumSubpartitions: 2, TargetVertex: "sink", Batches: []*weirv1.InFlightBatch{InFlightBatch(recs[:1])}}},
	}
	if n := ChannelStateRecords(cs); n != 3 {
		t.Fatalf("ChannelStateRecords = %d, want 3", n)
	}
	h, err := WriteChannelState(nil, dir, "sum", 1, cs, inline)
	if err != nil {
		t.Fatal(err)
	}
	if (h.GetPath() == "") != (inline > 0) || h.GetSize() == 0 {
		t.Fatalf("handle %v with inline threshold %d", h, inline)
	}
	prev := []*weirv1.SubtaskState{
		{Vertex: "sum", SubtaskIndex: 0, Parallelism: 2},
		{Vertex: "sum", SubtaskIndex: 1, Parallelism: 2, ChannelState: h},
	}
	d := func(i int) *weirv1.TaskDeploymentDescriptor {
		return descriptor("sum", i, 2, []gate{{"source", hash, 2}}, []output{{"sink", hash, 2}})
	}
	got, err := RestoreChannelState(nil, prev, d(1))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, cs) {
		t.Fatalf("restored %v, want %v", got, cs)
	}
	back := Records(got.GetInputs()[0].GetBatches()[0])
	if len(back) != 2 || string(back[0].Key) != "k1" || back[0].Timestamp != 7 || string(back[1].Value) != "2" {
		t.Fatalf("records %v", back)
	}
	if got, err := RestoreChannelState(nil, prev, d(0)); err != nil || got != nil {
		t.Fatalf("subtask 0 restored %v, %v; it had no channel state", got, err)
	}
	if h, err := WriteChannelState(nil, dir, "sum", 0, &weirv1.ChannelStateSnapshot{}, inline); err != nil || h != nil {
		t.Fatalf("empty channel state written: %v, %v", h, err)
	}
}
