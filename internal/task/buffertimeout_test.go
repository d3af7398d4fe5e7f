package task

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// trickle emits one record per call and asks to wait 100µs: a source
// far below its capacity.
type trickle struct{}

func (trickle) Open(sdk.Context) error { return nil }
func (trickle) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	out.Collect(sdk.Record{Value: []byte("r")})
	return sdk.SourceStatus{Backoff: 100 * time.Microsecond}, nil
}
func (trickle) Close() error { return nil }

// A partly filled batch of a rate-limited source goes out once the job's
// buffer timeout passed since the last flush, and at every pause with a
// timeout of 0; the default holds it for DefaultBufferTimeout.
func TestBufferTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout *durationpb.Duration
		hold    time.Duration // how long the first record waits
	}{
		{"default", nil, DefaultBufferTimeout},
		{"job's", durationpb.New(3 * time.Millisecond), 3 * time.Millisecond},
		{"zero", durationpb.New(0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1000, 0)}
			reg := sdk.NewRegistry()
			reg.RegisterSource("trickle", func() sdk.Source { return trickle{} })
			d := &weirv1.TaskDeploymentDescriptor{
				Attempt:  &weirv1.ExecutionAttemptID{JobId: "job", Vertex: "src", Attempt: 1},
				Operator: "trickle", Parallelism: 1, MaxParallelism: 128, BufferTimeout: tc.timeout,
				CheckpointOptions: &weirv1.CheckpointOptions{ExactlyOnce: true, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT},
				Outputs:           []*weirv1.OutputDescriptor{{TargetVertex: "sink", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD, NumSubpartitions: 1}},
			}
			tk, err := New(Config{
				Descriptor: d, Operators: reg, Network: localNetwork{reg: exchange.NewRegistry()}, Responder: newCollectingResponder(),
				Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.DiscardHandler), Now: clock.Now, StateDir: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			tk.asyncCtx, tk.lastFlush = ctx, clock.Now()
			if err := tk.setup(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				tk.async.Wait()
				tk.cleanup()
				tk.metrics.release()
			}()
			out := tk.parts[0].Subs[0]
			var waited time.Duration
			for {
				if _, _, err := tk.cycle(); err != nil {
					t.Fatal(err)
				}
				if b, _, ok := out.Poll(); ok {
					if len(b.Records) == 0 {
						t.Fatalf("sent %v", b.Kind)
					}
					break
				}
				if waited > time.Second {
					t.Fatal("the batch was never sent")
				}
				clock.advance(100 * time.Microsecond)
				waited += 100 * time.Microsecond
			}
			if waited < tc.hold || waited > tc.hold+100*time.Microsecond {
				t.Fatalf("the first batch went after %s, want %s", waited, tc.hold)
			}
		})
	}
}
