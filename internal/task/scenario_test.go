package task

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirproject/weir/internal/barrier"
	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// TestTaskScenarios runs the scenarios in testdata/task: one real subtask
// (a pass-through operator counting what it processed) between upstream
// queues the script fills and an output queue the script drains, all real
// exchange subpartitions with their bounds, on a clock only the script
// moves. The script drives the mailbox loop by hand, so every interleaving
// is written out. Commands:
//
//	new inputs=<n> mode=<mode> [timeout=<d>] [capacity=<buffers>] [overdraft=<buffers>]
//	    [upstream=<buffers>] [batch=<records>] [step=<records>]
//	send ch=<i> recs=<v1,v2,...>      upstream queues a records buffer, if it has room
//	barrier ch=<i> id=<n> [priority]  upstream sends a barrier (priority: unaligned, overtaking)
//	cancel ch=<i> id=<n>
//	abort id=<n>                      the JobManager says checkpoint n was aborted
//	eop ch=<i>
//	run [cycles=<n>]                  mailbox loop until idle (or n turns); prints what was processed
//	consume [n=<buffers>]             downstream takes buffers from the output queue
//	tick d=<duration>                 moves the clock
//	acks n=<total>                    waits for n responses in all and prints the new ones
//	restore id=<checkpoint> [inputs=<n>]  a new attempt from the acknowledged checkpoint
//	fail-snapshot id=<checkpoint>      the operator's SnapshotState fails for that checkpoint
//	state
func TestTaskScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/task", func(t *testing.T, path string) {
		s := &scenario{t: t}
		defer s.stop()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.exec(t, d)
		})
	})
}

// fakeClock is the subtask's clock; the script moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// collectingResponder records acknowledgements and declines.
type collectingResponder struct {
	mu      sync.Mutex
	changed chan struct{}
	acks    []*weirv1.AcknowledgeCheckpointRequest
	decls   []*weirv1.DeclineCheckpointRequest
}

func newCollectingResponder() *collectingResponder {
	return &collectingResponder{changed: make(chan struct{}, 1)}
}

func (r *collectingResponder) Acknowledge(_ context.Context, req *weirv1.AcknowledgeCheckpointRequest) error {
	r.mu.Lock()
	r.acks = append(r.acks, req)
	r.mu.Unlock()
	r.signal()
	return nil
}

func (r *collectingResponder) Decline(_ context.Context, req *weirv1.DeclineCheckpointRequest) error {
	r.mu.Lock()
	r.decls = append(r.decls, req)
	r.mu.Unlock()
	r.signal()
	return nil
}

func (r *collectingResponder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// scenarioNetwork connects the subtask to the script's upstream queues.
type scenarioNetwork struct {
	reg *exchange.Registry
	ups []*exchange.Subpartition
}

func (n *scenarioNetwork) Partitions() *exchange.Registry { return n.reg }

func (n *scenarioNetwork) OpenChannel(_ context.Context, ch *weirv1.InputChannelDescriptor, notify func()) (exchange.InputChannel, error) {
	return exchange.NewLocalChannel(n.ups[ch.GetPartition().GetProducer().GetSubtaskIndex()], notify), nil
}

// passOperator forwards records and keeps the number it processed as
// operator state, so a snapshot shows exactly which records it covers.
type passOperator struct {
	log   *[]string
	seen  int64
	state sdk.ListState
	// failAt is the checkpoint whose snapshot fails (0: none).
	failAt *int64
}

func (p *passOperator) Open(ctx sdk.Context) error {
	p.state = ctx.ListState("seen")
	for _, it := range p.state.Get() {
		p.seen = int64(binary.BigEndian.Uint64(it))
	}
	return nil
}

func (p *passOperator) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	*p.log = append(*p.log, string(r.Value))
	p.seen++
	out.Collect(r)
	return nil
}

func (p *passOperator) SnapshotState(id int64) error {
	if id == *p.failAt {
		return fmt.Errorf("snapshot of checkpoint %d failed", id)
	}
	p.state.Update([][]byte{binary.BigEndian.AppendUint64(nil, uint64(p.seen))})
	return nil
}

func (p *passOperator) Close() error { return nil }

type scenario struct {
	t         *testing.T
	dir       string
	clock     *fakeClock
	net       *scenarioNetwork
	resp      *collectingResponder
	task      *Task
	cancel    context.CancelFunc
	down      *exchange.Subpartition
	processed []string
	opts      *weirv1.CheckpointOptions
	cfg       Config
	upstream  int
	attempt   int32
	printed   int // responses printed so far
	failAt    int64
}

func (s *scenario) exec(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "new" && d.Cmd != "restore" && s.task == nil {
		d.Fatalf(t, "%s before new", d.Cmd)
	}
	intArg := func(name string, def int) int {
		if !d.HasArg(name) {
			return def
		}
		var v int
		d.ScanArgs(t, name, &v)
		return v
	}
	switch d.Cmd {
	case "new":
		s.stop()
		n := intArg("inputs", 2)
		mode, timeout := scanMode(t, d)
		s.opts = &weirv1.CheckpointOptions{Type: weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT, ExactlyOnce: mode != barrier.ModeAtLeastOnce}
		switch mode {
		case barrier.ModeUnaligned:
			s.opts.Unaligned = true
		case barrier.ModeAlignedTimeout:
			s.opts.Unaligned, s.opts.AlignedCheckpointTimeoutMs = true, timeout.Milliseconds()
		}
		s.dir = t.TempDir()
		s.clock = &fakeClock{now: time.Unix(1000, 0)}
		s.resp = newCollectingResponder()
		s.upstream = intArg("upstream", 2)
		s.cfg = Config{
			QueueCapacity: intArg("capacity", 2), Overdraft: intArg("overdraft", 1),
			BatchSize: intArg("batch", 2), StepRecords: intArg("step", 2),
			FlushInterval: time.Hour, // flushed when idle only: deterministic batches
		}
		s.attempt, s.printed, s.failAt = 1, 0, 0
		if err := s.start(t, n, nil); err != nil {
			d.Fatalf(t, "%v", err)
		}
		return "ok\n"
	case "send":
		var ch int
		var recs string
		d.ScanArgs(t, "ch", &ch)
		d.ScanArgs(t, "recs", &recs)
		up := s.net.ups[ch]
		if !up.Available() {
			return fmt.Sprintf("upstream %d is full: not sent (the producer is back-pressured)\n%s", ch, s.state())
		}
		var rs []sdk.Record
		for _, v := range strings.Split(recs, ",") {
			rs = append(rs, sdk.Record{Key: []byte(v), Value: []byte(v)})
		}
		if _, err := up.Add(t.Context(), exchange.Buffer{Kind: exchange.KindRecords, Records: rs}); err != nil {
			d.Fatalf(t, "send: %v", err)
		}
		return s.state()
	case "barrier":
		var ch int
		var id int64
		d.ScanArgs(t, "ch", &ch)
		d.ScanArgs(t, "id", &id)
		b := exchange.Buffer{Kind: exchange.KindBarrier, Barrier: &weirv1.CheckpointBarrier{CheckpointId: id, Options: s.opts}}
		if d.HasArg("priority") {
			b.Barrier = barrier.ToUnaligned(b.Barrier)
			over, err := s.net.ups[ch].AddPriority(b)
			if err != nil {
				d.Fatalf(t, "barrier: %v", err)
			}
			return fmt.Sprintf("overtook upstream: %s\n%s", describeBuffers(over), s.state())
		}
		if err := s.net.ups[ch].Put(b); err != nil {
			d.Fatalf(t, "barrier: %v", err)
		}
		return s.state()
	case "cancel":
		var ch int
		var id int64
		d.ScanArgs(t, "ch", &ch)
		d.ScanArgs(t, "id", &id)
		if err := s.net.ups[ch].Put(exchange.Buffer{Kind: exchange.KindCancelMarker, CheckpointID: id}); err != nil {
			d.Fatalf(t, "cancel: %v", err)
		}
		return s.state()
	case "abort":
		var id int64
		d.ScanArgs(t, "id", &id)
		s.task.NotifyCheckpointAborted(id)
		return s.state()
	case "eop":
		var ch int
		d.ScanArgs(t, "ch", &ch)
		if err := s.net.ups[ch].Put(exchange.Buffer{Kind: exchange.KindEndOfPartition}); err != nil {
			d.Fatalf(t, "eop: %v", err)
		}
		return s.state()
	case "run":
		s.processed = nil
		cycles := intArg("cycles", 0)
		for i := 0; cycles == 0 || i < cycles; i++ {
			if i > 10000 {
				d.Fatalf(t, "the mailbox loop never went idle")
			}
			idle, _, err := s.task.cycle()
			if err != nil {
				return fmt.Sprintf("error: %v\n", err)
			}
			if idle {
				break
			}
		}
		p := "nothing"
		if len(s.processed) > 0 {
			p = strings.Join(s.processed, " ")
		}
		return fmt.Sprintf("processed: %s\n%s", p, s.state())
	case "consume":
		n := intArg("n", 1<<30)
		var out []string
		for range n {
			b, _, ok := s.down.Poll()
			if !ok {
				break
			}
			out = append(out, describeBuffer(b))
		}
		if len(out) == 0 {
			out = []string{"nothing"}
		}
		return fmt.Sprintf("downstream got: %s\n%s", strings.Join(out, " "), s.state())
	case "tick":
		var v string
		d.ScanArgs(t, "d", &v)
		dur, err := time.ParseDuration(v)
		if err != nil {
			d.Fatalf(t, "tick: %v", err)
		}
		s.clock.advance(dur)
		return "ok\n"
	case "acks":
		return s.acks(t, d, intArg("n", 0))
	case "restore":
		var id int64
		d.ScanArgs(t, "id", &id)
		var st *weirv1.SubtaskState
		s.resp.mu.Lock()
		for _, a := range s.resp.acks {
			if a.GetCheckpointId() == id {
				st = a.GetState()
			}
		}
		s.resp.mu.Unlock()
		if st == nil {
			d.Fatalf(t, "checkpoint %d was not acknowledged", id)
		}
		n := intArg("inputs", len(s.net.ups))
		s.stop()
		s.attempt++
		if err := s.start(t, n, &weirv1.TaskRestore{CheckpointId: id, Subtasks: []*weirv1.SubtaskState{st}}); err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		return fmt.Sprintf("restored attempt %d from checkpoint %d\n%s", s.attempt, id, s.state())
	case "fail-snapshot":
		d.ScanArgs(t, "id", &s.failAt)
		return "ok\n"
	case "state":
		return s.state()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// start deploys attempt s.attempt with n fresh upstream queues.
func (s *scenario) start(t *testing.T, n int, restore *weirv1.TaskRestore) error {
	s.net = &scenarioNetwork{reg: exchange.NewRegistry()}
	gate := &weirv1.InputGateDescriptor{SourceVertex: "up", Partitioner: weirv1.Partitioner_PARTITIONER_REBALANCE}
	for i := range n {
		s.net.ups = append(s.net.ups, exchange.NewSubpartition(s.upstream, 0))
		gate.Channels = append(gate.Channels, &weirv1.InputChannelDescriptor{Partition: &weirv1.ResultPartitionID{
			Producer: &weirv1.ExecutionAttemptID{JobId: "job", Vertex: "up", SubtaskIndex: int32(i), Attempt: 1}, ConsumerVertex: "map",
		}})
	}
	desc := &weirv1.TaskDeploymentDescriptor{
		Attempt:  &weirv1.ExecutionAttemptID{JobId: "job", Vertex: "map", Attempt: s.attempt},
		Operator: "pass", Parallelism: 1, MaxParallelism: 128,
		Inputs:            []*weirv1.InputGateDescriptor{gate},
		Outputs:           []*weirv1.OutputDescriptor{{TargetVertex: "down", Partitioner: weirv1.Partitioner_PARTITIONER_FORWARD, NumSubpartitions: 1}},
		CheckpointOptions: s.opts, CheckpointDir: s.dir, Restore: restore,
	}
	for id := int64(1); id <= 20; id++ {
		if _, err := (storage.Storage{Dir: s.dir}).InitLocation("job", id); err != nil {
			t.Fatal(err)
		}
	}
	reg := sdk.NewRegistry()
	reg.RegisterOperator("pass", func() sdk.Operator { return &passOperator{log: &s.processed, failAt: &s.failAt} })
	cfg := s.cfg
	cfg.Descriptor, cfg.Operators, cfg.Network, cfg.Responder = desc, reg, s.net, s.resp
	cfg.Metrics, cfg.Logger, cfg.Now = NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler), s.clock.Now
	tk, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tk.asyncCtx, tk.lastFlush = ctx, s.clock.Now()
	if err := tk.setup(ctx); err != nil {
		cancel()
		tk.cleanup()
		tk.metrics.release()
		return err
	}
	s.task, s.cancel, s.down = tk, cancel, tk.parts[0].Subs[0]
	return nil
}

// stop ends the running attempt the way Run does.
func (s *scenario) stop() {
	if s.task == nil {
		return
	}
	s.cancel()
	s.task.abortChannelState()
	s.task.async.Wait()
	s.task.cleanup()
	s.task.metrics.release()
	s.task = nil
}

// acks waits until n responses arrived in all and prints those not printed
// yet, ordered by checkpoint.
func (s *scenario) acks(t *testing.T, d *datadriven.TestData, n int) string {
	deadline := time.After(10 * time.Second)
	var lines []string
	for {
		s.resp.mu.Lock()
		total := len(s.resp.acks) + len(s.resp.decls)
		if total >= n {
			type resp struct {
				id   int64
				line string
			}
			var all []resp
			for _, a := range s.resp.acks {
				all = append(all, resp{a.GetCheckpointId(), describeAck(t, a)})
			}
			for _, dcl := range s.resp.decls {
				all = append(all, resp{dcl.GetCheckpointId(), fmt.Sprintf("decline %d: %s",
					dcl.GetCheckpointId(), strings.TrimPrefix(dcl.GetReason().String(), "CHECKPOINT_FAILURE_REASON_"))})
			}
			s.resp.mu.Unlock()
			slices.SortStableFunc(all, func(a, b resp) int { return int(a.id - b.id) })
			// Responses arrive in any order; print each once, in id order,
			// by remembering how many lines were printed.
			for i, r := range all {
				if i >= s.printed {
					lines = append(lines, r.line)
				}
			}
			s.printed = len(all)
			break
		}
		s.resp.mu.Unlock()
		select {
		case <-s.resp.changed:
		case <-deadline:
			d.Fatalf(t, "only %d of %d responses within 10s", total, n)
		}
	}
	if len(lines) == 0 {
		return "no new responses\n"
	}
	return strings.Join(lines, "\n") + "\n"
}

func describeAck(t *testing.T, a *weirv1.AcknowledgeCheckpointRequest) string {
	m := a.GetMetrics()
	kind := "aligned"
	if m.GetUnaligned() {
		kind = "unaligned"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ack %d: %s alignment=%v processed=%dB persisted=%dB", a.GetCheckpointId(), kind,
		time.Duration(m.GetAlignmentDurationMs())*time.Millisecond, m.GetBytesBufferedDuringAlignment(), m.GetBytesPersistedDuringAlignment())
	st := a.GetState()
	if p := st.GetOperatorState().GetPath(); p != "" {
		ops := &weirv1.OperatorStateSnapshot{}
		if err := storage.ReadProto(p, ops); err != nil {
			t.Fatal(err)
		}
		for _, l := range ops.GetStates() {
			for _, it := range l.GetItems() {
				fmt.Fprintf(&b, " %s=%d", l.GetName(), binary.BigEndian.Uint64(it))
			}
		}
	}
	if p := st.GetChannelState().GetPath(); p != "" {
		cs := &weirv1.ChannelStateSnapshot{}
		if err := storage.ReadProto(p, cs); err != nil {
			t.Fatal(err)
		}
		for _, in := range cs.GetInputs() {
			fmt.Fprintf(&b, "\n  input channel %d: %s", in.GetChannel(), describeBatches(in.GetBatches()))
		}
		for _, out := range cs.GetOutputs() {
			fmt.Fprintf(&b, "\n  output subpartition %d: %s", out.GetSubpartition(), describeBatches(out.GetBatches()))
		}
	} else {
		b.WriteString(" (no channel state)")
	}
	return b.String()
}

func describeBatches(bs []*weirv1.InFlightBatch) string {
	var parts []string
	for _, b := range bs {
		var vs []string
		for _, r := range b.GetRecords() {
			vs = append(vs, string(r.GetValue()))
		}
		parts = append(parts, "["+strings.Join(vs, " ")+"]")
	}
	return strings.Join(parts, " ")
}

func describeBuffer(b exchange.Buffer) string {
	var s string
	switch b.Kind {
	case exchange.KindRecords:
		var vs []string
		for _, r := range b.Records {
			vs = append(vs, string(r.Value))
		}
		s = "[" + strings.Join(vs, " ") + "]"
	case exchange.KindBarrier:
		s = fmt.Sprintf("barrier(%d)", b.Barrier.GetCheckpointId())
		if m, _ := barrier.ModeOf(b.Barrier.GetOptions()); m == barrier.ModeUnaligned {
			s += "unaligned"
		}
	case exchange.KindCancelMarker:
		s = fmt.Sprintf("cancel(%d)", b.CheckpointID)
	default:
		s = b.Kind.String()
	}
	if b.Priority {
		s += "!"
	}
	return s
}

func describeBuffers(bs []exchange.Buffer) string {
	if len(bs) == 0 {
		return "nothing"
	}
	var parts []string
	for _, b := range bs {
		parts = append(parts, describeBuffer(b))
	}
	return strings.Join(parts, " ")
}

// state prints the queues (length/capacity) and the handler.
func (s *scenario) state() string {
	var ups []string
	for _, u := range s.net.ups {
		n, _ := u.Queued()
		ups = append(ups, fmt.Sprintf("%d/%d", n, s.upstream))
	}
	out, _ := s.down.Queued()
	h := s.task.barriers
	n := len(s.net.ups)
	line := fmt.Sprintf("upstream: %s output: %d/%d", strings.Join(ups, " "), out, s.cfg.QueueCapacity)
	if !s.task.outputAvailable() {
		line += " (back-pressured)"
	}
	if ids := h.InProgress(); len(ids) > 0 {
		line += " | checkpoint " + formatIDs(ids)
		if b := channels(n, h.Blocked); b != "" {
			line += " blocked: " + b
		}
		if r := channels(n, h.Recording); r != "" {
			line += " recording: " + r
		}
	}
	return line + "\n"
}

// scanMode reads mode= and timeout= as the barrier scenarios do.
func scanMode(t *testing.T, d *datadriven.TestData) (barrier.Mode, time.Duration) {
	var name string
	d.ScanArgs(t, "mode", &name)
	var timeout time.Duration
	if d.HasArg("timeout") {
		var s string
		d.ScanArgs(t, "timeout", &s)
		var err error
		if timeout, err = time.ParseDuration(s); err != nil {
			d.Fatalf(t, "timeout: %v", err)
		}
	}
	mode, timeout, err := barrier.ParseMode(name, timeout)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return mode, timeout
}

func channels(n int, f func(int) bool) string {
	var out []string
	for ch := range n {
		if f(ch) {
			out = append(out, fmt.Sprint(ch))
		}
	}
	return strings.Join(out, ",")
}

func formatIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
