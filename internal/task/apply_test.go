package task

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/barrier"
	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

type recordingResponder struct {
	mu       sync.Mutex
	declined []int64
}

func (r *recordingResponder) Acknowledge(context.Context, *weirv1.AcknowledgeCheckpointRequest) error {
	return nil
}

func (r *recordingResponder) Decline(_ context.Context, req *weirv1.DeclineCheckpointRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.declined = append(r.declined, req.GetCheckpointId())
	return nil
}

// A cancel marker for a newer checkpoint that ends an older alignment gives
// up both: the subtask declines both and forwards both markers, in order, so
// a consumer that got the newer barrier through another input stops
// aligning it instead of blocking that input until the next checkpoint.
func TestApplyForwardsCancelMarkerOfNewerCheckpoint(t *testing.T) {
	ctx := t.Context()
	attempt := &weirv1.ExecutionAttemptID{JobId: "job", Vertex: "map", Attempt: 1}
	part := exchange.NewResultPartition(&weirv1.ResultPartitionID{Producer: attempt, ConsumerVertex: "sink"}, 2, 8, 0)
	resp := &recordingResponder{}
	tk := &Task{
		cfg:      Config{Responder: resp},
		attempt:  attempt,
		log:      slog.New(slog.DiscardHandler),
		now:      time.Now,
		asyncCtx: ctx,
		writers:  []*exchange.RecordWriter{exchange.NewRecordWriter(ctx, part, weirv1.Partitioner_PARTITIONER_HASH, 128, 0, 16)},
	}
	h := barrier.New(2, barrier.ModeAligned, 0)
	if _, err := h.OnBarrier(0, &weirv1.CheckpointBarrier{CheckpointId: 5}, time.Now()); err != nil {
		t.Fatal(err)
	}
	d, err := h.OnCancelMarker(1, 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.apply(d, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	tk.async.Wait()
	slices.Sort(resp.declined)
	if !slices.Equal(resp.declined, []int64{5, 6}) {
		t.Fatalf("declined %v, want [5 6]", resp.declined)
	}
	for i, sub := range part.Subs {
		var got []int64
		for {
			b, _, ok := sub.Poll()
			if !ok {
				break
			}
			if b.Kind != exchange.KindCancelMarker {
				t.Fatalf("subpartition %d: unexpected %s", i, b.Kind)
			}
			got = append(got, b.CheckpointID)
		}
		if !slices.Equal(got, []int64{5, 6}) {
			t.Fatalf("subpartition %d: cancel markers %v, want [5 6]", i, got)
		}
	}
	// The newer checkpoint's barriers, arriving later, are ignored.
	if d, err := h.OnBarrier(0, &weirv1.CheckpointBarrier{CheckpointId: 6}, time.Now()); err != nil || d != (barrier.Decision{}) {
		t.Fatalf("late barrier 6: %+v %v", d, err)
	}
}
