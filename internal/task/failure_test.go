package task

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// These tests run a small job in one process — a source emitting keyed
// records into a counting operator over a hash edge — with a file system
// that can fail on demand, and check how a subtask ends when its disk or
// its operator fails.

const failTimeout = 60 * time.Second

// genSource emits records with 16 keys, one per Emit, a little apart so the
// job idles more than it spins.
type genSource struct{ n int }

func (g *genSource) Open(sdk.Context) error { return nil }
func (g *genSource) Emit(out sdk.Collector) (sdk.SourceStatus, error) {
	out.Collect(sdk.Record{Key: []byte(fmt.Sprintf("k%02d", g.n%16)), Value: []byte("x")})
	g.n++
	return sdk.SourceStatus{Backoff: 200 * time.Microsecond}, nil
}
func (g *genSource) Close() error { return nil }

// countOperator counts records per key in keyed state (each count padded
// to pad bytes, to fill the store faster) and reports each record it
// processed; with panicAfter set, subtask panicSubtask panics on that many
// records.
type countOperator struct {
	env          *failEnv
	ctx          sdk.Context
	count        sdk.ValueState
	seen         int64
	pad          int64
	panicAfter   int64
	panicSubtask int64
}

func (c *countOperator) Open(ctx sdk.Context) error {
	c.ctx, c.count = ctx, ctx.ValueState("count")
	cfg := ctx.Config()
	var err error
	if c.panicAfter, err = cfg.Int("panic-after", 0); err != nil {
		return err
	}
	if c.pad, err = cfg.Int("pad", 0); err != nil {
		return err
	}
	c.panicSubtask, err = cfg.Int("panic-subtask", 0)
	return err
}

func (c *countOperator) ProcessRecord(r sdk.Record, _ sdk.Collector) error {
	var n uint64
	if v, ok := c.count.Value(); ok {
		n = binary.BigEndian.Uint64(v[:8])
	}
	v := make([]byte, 8+c.pad)
	binary.BigEndian.PutUint64(v, n+1)
	c.count.Update(v)
	c.seen++
	if c.panicAfter > 0 && c.seen == c.panicAfter && int64(c.ctx.SubtaskIndex()) == c.panicSubtask {
		panic(fmt.Sprintf("count: cannot handle record %s", r.Key))
	}
	c.env.processed.Add(1)
	select {
	case c.env.progress <- struct{}{}:
	default:
	}
	return nil
}

func (c *countOperator) Close() error { return nil }

// localNetwork connects subtasks through the partitions they register.
type localNetwork struct{ reg *exchange.Registry }

func (n localNetwork) Partitions() *exchange.Registry { return n.reg }

func (n localNetwork) OpenChannel(ctx context.Context, ch *weirv1.InputChannelDescriptor, notify func()) (exchange.InputChannel, error) {
	p, err := n.reg.Lookup(ctx, ch.GetPartition())
	if err != nil {
		return nil, err
	}
	return exchange.NewLocalChannel(p.Subs[ch.GetSubpartition()], notify), nil
}

// failEnv is a running job: source → count (hash).
type failEnv struct {
	t         *testing.T
	dir       string // checkpoint directory
	resp      *collectingResponder
	tasks     map[string]*Task // "src/0", "count/1"
	stateDirs map[string]string
	done      map[string]chan error
	cancel    context.CancelFunc
	processed atomic.Int64
	progress  chan struct{}
}

type failJob struct {
	parallelism int // of count
	backend     weirv1.StateBackendConfig_Backend
	incremental bool
	config      map[string]any // count's
	fs          vfs.FS
	restore     map[string][]*weirv1.SubtaskState // by vertex
	restoreID   int64
	// stateRoot holds each subtask's local state directory, named after
	// it ("count-0"); a temporary directory when empty.
	stateRoot string
	// stateCache is Config.StateCacheBytes.
	stateCache int
}

func startFailJob(t *testing.T, dir string, o failJob) *failEnv {
	t.Helper()
	e := &failEnv{
		t: t, dir: dir, resp: newCollectingResponder(), tasks: map[string]*Task{}, stateDirs: map[string]string{},
		done: map[string]chan error{}, progress: make(chan struct{}, 1),
	}
	net := localNetwork{reg: exchange.NewRegistry()}
	ops := sdk.NewRegistry()
	ops.RegisterSource("gen", func() sdk.Source { return &genSource{} })
	ops.RegisterOperator("count", func() sdk.Operator { return &countOperator{env: e} })
	cfg, err := structpb.NewStruct(o.config)
	if err != nil {
		t.Fatal(err)
	}
	src := &weirv1.ExecutionAttemptID{JobId: "job", Vertex: "src", Attempt: 1}
	opts := &weirv1.CheckpointOptions{ExactlyOnce: true, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT}
	sb := &weirv1.StateBackendConfig{Backend: o.backend, Incremental: o.incremental}
	descs := []*weirv1.TaskDeploymentDescriptor{{
		Attempt: src, Operator: "gen", Parallelism: 1, MaxParallelism: 128, CheckpointOptions: opts, CheckpointDir: dir,
		StateBackend: sb,
		Outputs:      []*weirv1.OutputDescriptor{{TargetVertex: "count", Partitioner: weirv1.Partitioner_PARTITIONER_HASH, NumSubpartitions: int32(o.parallelism)}},
	}}
	for i := range o.parallelism {
		descs = append(descs, &weirv1.TaskDeploymentDescriptor{
			Attempt:  &weirv1.ExecutionAttemptID{JobId: "job", Vertex: "count", SubtaskIndex: int32(i), Attempt: 1},
			Operator: "count", Config: cfg, Parallelism: int32(o.parallelism), MaxParallelism: 128,
			CheckpointOptions: opts, CheckpointDir: dir, StateBackend: sb,
			Inputs: []*weirv1.InputGateDescriptor{{SourceVertex: "src", Partitioner: weirv1.Partitioner_PARTITIONER_HASH, Channels: []*weirv1.InputChannelDescriptor{
				{Partition: &weirv1.ResultPartitionID{Producer: src, ConsumerVertex: "count"}, Subpartition: int32(i)},
			}}},
		})
	}
	if o.stateRoot == "" {
		o.stateRoot = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	for _, d := range descs {
		key := fmt.Sprintf("%s/%d", d.GetAttempt().GetVertex(), d.GetAttempt().GetSubtaskIndex())
		if o.restore != nil {
			d.Restore = &weirv1.TaskRestore{CheckpointId: o.restoreID, Subtasks: o.restore[d.GetAttempt().GetVertex()]}
		}
		e.stateDirs[key] = filepath.Join(o.stateRoot, fmt.Sprintf("%s-%d", d.GetAttempt().GetVertex(), d.GetAttempt().GetSubtaskIndex()))
		tk, err := New(Config{
			Descriptor: d, Operators: ops, Network: net, Responder: e.resp, Metrics: NewMetrics(prometheus.NewRegistry()),
			Logger: slog.New(slog.DiscardHandler), StateDir: e.stateDirs[key], FS: o.fs,
			StateCacheBytes: o.stateCache,
		})
		if err != nil {
			t.Fatal(err)
		}
		e.tasks[key] = tk
		e.done[key] = make(chan error, 1)
	}
	for key, tk := range e.tasks {
		go func() { e.done[key] <- tk.Run(ctx) }()
	}
	t.Cleanup(e.stop)
	return e
}

// stop cancels the subtasks still running and waits for all of them.
func (e *failEnv) stop() {
	e.cancel()
	for key, ch := range e.done {
		select {
		case err := <-ch:
			ch <- err // for the next stop
		case <-time.After(failTimeout):
			e.t.Errorf("subtask %s did not stop", key)
		}
	}
}

// failure waits for subtask key to end and returns its error.
func (e *failEnv) failure(key string) error {
	e.t.Helper()
	select {
	case err := <-e.done[key]:
		e.done[key] <- err // stop reads it again
		if err == nil {
			e.t.Fatalf("subtask %s finished instead of failing", key)
		}
		return err
	case <-time.After(failTimeout):
		e.t.Fatalf("subtask %s did not fail within %v", key, failTimeout)
		return nil
	}
}

// running checks that subtask key has not ended.
func (e *failEnv) running(key string) {
	e.t.Helper()
	select {
	case err := <-e.done[key]:
		e.done[key] <- err
		e.t.Fatalf("subtask %s ended: %v", key, err)
	default:
	}
}

// waitProcessed waits until count processed at least n records.
func (e *failEnv) waitProcessed(n int64) {
	e.t.Helper()
	deadline := time.After(failTimeout)
	for e.processed.Load() < n {
		select {
		case <-e.progress:
		case <-deadline:
			e.t.Fatalf("only %d of %d records processed", e.processed.Load(), n)
		}
	}
}

// An operator that panics fails its own subtask, with the panic as the
// cause; the process, and the other subtasks, go on.
func TestOperatorPanicFailsOnlyItsSubtask(t *testing.T) {
	e := startFailJob(t, t.TempDir(), failJob{parallelism: 2, config: map[string]any{"panic-after": 3, "panic-subtask": 1}})
	err := e.failure("count/1")
	if !strings.Contains(err.Error(), "panic") || !strings.Contains(err.Error(), "count: cannot handle record") {
		t.Fatalf("failure cause %q does not carry the panic", err)
	}
	e.waitProcessed(e.processed.Load() + 5) // subtask 0 goes on
	e.running("src/0")
	e.running("count/0")
}

// injectOn fails the file operations match accepts once armed.
type injectOn struct {
	armed atomic.Bool
	match func(op errorfs.Op) bool
}

func (i *injectOn) String() string { return "injectOn" }
func (i *injectOn) MaybeError(op errorfs.Op) error {
	if i.armed.Load() && i.match(op) {
		return errorfs.ErrInjected
	}
	return nil
}

// A disk error of the embedded store fails the subtask that owns it, with
// the error as the cause, instead of crashing or hanging the process:
// writing the SST file of a memtable flush (in the background), or reading
// one back.
func TestPebbleDiskErrorFailsSubtask(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(errorfs.OpKind) bool
	}{
		{"write", func(k errorfs.OpKind) bool { return k == errorfs.OpCreate || k == errorfs.OpFileWrite }},
		{"read", func(k errorfs.OpKind) bool {
			return k == errorfs.OpOpen || k == errorfs.OpFileReadAt || k == errorfs.OpFileRead
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			inj := &injectOn{match: func(op errorfs.Op) bool {
				return tc.op(op.Kind) && strings.HasPrefix(op.Path, filepath.Join(root, "count-0")) && strings.HasSuffix(op.Path, ".sst")
			}}
			if tc.name == "write" {
				inj.armed.Store(true)
			}
			// 16 keys of 1 MiB fill a memtable quickly: flushes write SSTs
			// in the background, and most reads go to them. A cache of 1
			// MiB writes each value back and evicts it at once: the store
			// sees every access, as it would with state larger than the
			// cache.
			e := startFailJob(t, t.TempDir(), failJob{
				parallelism: 1, backend: weirv1.StateBackendConfig_BACKEND_PEBBLE, fs: errorfs.Wrap(vfs.Default, inj),
				config: map[string]any{"pad": 1 << 20}, stateRoot: root, stateCache: 1 << 20,
			})
			if tc.name == "read" {
				e.waitProcessed(64)
				inj.armed.Store(true)
			}
			err := e.failure("count/0")
			var se *state.StoreError
			if !errors.Is(err, errorfs.ErrInjected) || !errors.As(err, &se) {
				t.Fatalf("failure cause %q is not the disk error", err)
			}
			e.running("src/0")
		})
	}
}

// checkpoint triggers checkpoint id at the source and waits for the
// responses of every subtask.
func (e *failEnv) checkpoint(id int64, subtasks int) (acks []*weirv1.AcknowledgeCheckpointRequest, declines []*weirv1.DeclineCheckpointRequest) {
	e.t.Helper()
	if _, err := (storage.Storage{Dir: e.dir}).InitLocation("job", id); err != nil {
		e.t.Fatal(err)
	}
	e.tasks["src/0"].TriggerCheckpoint(id, time.Now().UnixMilli(), &weirv1.CheckpointOptions{ExactlyOnce: true, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT})
	deadline := time.After(failTimeout)
	for {
		e.resp.mu.Lock()
		acks, declines = nil, nil
		for _, a := range e.resp.acks {
			if a.GetCheckpointId() == id {
				acks = append(acks, a)
			}
		}
		for _, d := range e.resp.decls {
			if d.GetCheckpointId() == id {
				declines = append(declines, d)
			}
		}
		e.resp.mu.Unlock()
		if len(acks)+len(declines) >= subtasks {
			return acks, declines
		}
		select {
		case <-e.resp.changed:
		case <-deadline:
			e.t.Fatalf("checkpoint %d: %d acks and %d declines of %d subtasks", id, len(acks), len(declines), subtasks)
		}
	}
}

// A write error of checkpoint storage declines the checkpoint: the
// subtask goes on, and the next checkpoint completes.
func TestStorageWriteErrorDeclinesCheckpoint(t *testing.T) {
	dir := t.TempDir()
	chk1 := (storage.Storage{Dir: dir}).CheckpointDir("job", 1)
	e := startFailJob(t, dir, failJob{
		parallelism: 1,
		fs: errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpCreate && strings.HasPrefix(op.Path, filepath.Join(chk1, "count-0")) {
				return errorfs.ErrInjected
			}
			return nil
		})),
		config: map[string]any{},
	})
	e.waitProcessed(10)
	acks, declines := e.checkpoint(1, 2)
	if len(declines) != 1 || declines[0].GetAttempt().GetVertex() != "count" ||
		declines[0].GetReason() != weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_IO_EXCEPTION ||
		!strings.Contains(declines[0].GetMessage(), "injected") {
		t.Fatalf("checkpoint 1: acks %v, declines %v; want count's decline with the disk error", acks, declines)
	}
	if acks, declines := e.checkpoint(2, 2); len(acks) != 2 {
		t.Fatalf("checkpoint 2: acks %v, declines %v", acks, declines)
	}
	e.running("count/0")
}

// A source triggered again for a checkpoint it already started (a call
// delivered twice) takes no second snapshot: the second would write over
// the first's files, which a completed checkpoint may reference, and
// acknowledge again. One overtaken by a newer checkpoint is declined.
func TestSourceIgnoresRepeatedTrigger(t *testing.T) {
	e := startFailJob(t, t.TempDir(), failJob{parallelism: 1, config: map[string]any{}})
	e.waitProcessed(10)
	if acks, declines := e.checkpoint(2, 2); len(acks) != 2 {
		t.Fatalf("checkpoint 2: acks %v, declines %v", acks, declines)
	}
	for _, id := range []int64{2, 1} {
		e.tasks["src/0"].TriggerCheckpoint(id, time.Now().UnixMilli(), &weirv1.CheckpointOptions{ExactlyOnce: true, Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT})
	}
	if acks, declines := e.checkpoint(3, 2); len(acks) != 2 {
		t.Fatalf("checkpoint 3: acks %v, declines %v", acks, declines)
	}
	e.resp.mu.Lock()
	defer e.resp.mu.Unlock()
	n := map[int64]int{}
	for _, a := range e.resp.acks {
		n[a.GetCheckpointId()]++
	}
	if n[1] != 0 || n[2] != 2 {
		t.Fatalf("acks per checkpoint %v: checkpoint 2 acked by each subtask once, 1 by none", n)
	}
	e.resp.mu.Unlock()
	// Overtaken by 2, checkpoint 1 is declined at once rather than left
	// to expire.
	deadline := time.After(failTimeout)
	for {
		e.resp.mu.Lock()
		declined := false
		for _, d := range e.resp.decls {
			declined = declined || d.GetCheckpointId() == 1 && d.GetReason() == weirv1.CheckpointFailureReason_CHECKPOINT_FAILURE_REASON_CHECKPOINT_DECLINED_SUBSUMED
		}
		e.resp.mu.Unlock()
		if declined {
			break
		}
		select {
		case <-e.resp.changed:
		case <-deadline:
			t.Fatal("checkpoint 1, overtaken by 2, not declined as subsumed")
		}
	}
	e.resp.mu.Lock()
}
