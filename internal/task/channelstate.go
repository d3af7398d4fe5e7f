package task

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/exchange"
	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// channelRecorder holds the channel state of one unaligned checkpoint while
// the mailbox records it: the output its barrier overtook, and per input
// channel the records read after the snapshot and before that channel's
// barrier. The mailbox owns it until done is closed; then the checkpoint's
// asynchronous part reads it. Its size is bounded by what the exchange
// holds in flight (queues, credits, one batch per subpartition): only
// records that were already sent before a barrier are recorded.
type channelRecorder struct {
	id      int64
	inputs  [][]exchange.Buffer   // per input channel
	outputs [][][]exchange.Buffer // per output, per subpartition
	bytes   int64

	// unaligned: the checkpoint's barrier overtook data here (set from the
	// start, or when an aligned-timeout barrier went ahead).
	unaligned bool

	// Set by the mailbox before it closes done.
	done      chan struct{}
	aborted   bool
	alignment time.Duration
	processed int64
}

func newChannelRecorder(id int64, inputs, outputs int) *channelRecorder {
	return &channelRecorder{
		id: id, inputs: make([][]exchange.Buffer, inputs), outputs: make([][][]exchange.Buffer, outputs),
		done: make(chan struct{}),
	}
}

func (r *channelRecorder) addInput(ch int, b exchange.Buffer) {
	if len(b.Records) == 0 {
		return
	}
	r.inputs[ch] = append(r.inputs[ch], exchange.Buffer{Kind: exchange.KindRecords, Records: b.Records})
	r.bytes += b.Size()
}

func (r *channelRecorder) addOutput(out, sub int, b exchange.Buffer) {
	if len(b.Records) == 0 {
		return
	}
	for len(r.outputs[out]) <= sub {
		r.outputs[out] = append(r.outputs[out], nil)
	}
	r.outputs[out][sub] = append(r.outputs[out][sub], exchange.Buffer{Kind: exchange.KindRecords, Records: b.Records})
	r.bytes += b.Size()
}

// finish completes the channel state: every barrier arrived.
func (r *channelRecorder) finish(alignment time.Duration, processed int64) {
	r.alignment, r.processed = alignment, processed
	close(r.done)
}

// abort gives the checkpoint up; the asynchronous part acknowledges nothing.
func (r *channelRecorder) abort() {
	r.aborted = true
	close(r.done)
}

// snapshot is the file content, placing each channel by the descriptor.
func (r *channelRecorder) snapshot(d *weirv1.TaskDeploymentDescriptor) *weirv1.ChannelStateSnapshot {
	cs := &weirv1.ChannelStateSnapshot{}
	flat := 0
	for gi, g := range d.GetInputs() {
		for ci := range g.GetChannels() {
			if bufs := r.inputs[flat]; len(bufs) > 0 {
				in := &weirv1.InputChannelState{
					Gate: int32(gi), Channel: int32(ci), NumChannels: int32(len(g.GetChannels())), SourceVertex: g.GetSourceVertex(),
				}
				for _, b := range bufs {
					in.Batches = append(in.Batches, state.InFlightBatch(b.Records))
				}
				cs.Inputs = append(cs.Inputs, in)
			}
			flat++
		}
	}
	// A chained subtask records no output towards the next operator of
	// its chain: nothing is in flight there.
	for oi, subs := range r.outputs {
		o := d.GetOutputs()[oi]
		for sub, bufs := range subs {
			if len(bufs) == 0 {
				continue
			}
			out := &weirv1.ResultSubpartitionState{
				Partition: int32(oi), Subpartition: int32(sub), NumSubpartitions: o.GetNumSubpartitions(), TargetVertex: o.GetTargetVertex(),
			}
			for _, b := range bufs {
				out.Batches = append(out.Batches, state.InFlightBatch(b.Records))
			}
			cs.Outputs = append(cs.Outputs, out)
		}
	}
	return cs
}

// restoreOutput queues the recovered output state, each batch to the
// subpartition it was overtaken in.
func (t *Task) restoreOutput(cs *weirv1.ChannelStateSnapshot) error {
	outs := t.desc.GetOutputs()
	if t.next != nil {
		// Recovered output towards the chained operator (the checkpoint
		// was taken unchained) is its first input, after what it had
		// received itself: it was sent later.
		for _, o := range cs.GetOutputs() {
			if o.GetTargetVertex() != t.next.attempt.GetVertex() || o.GetSubpartition() != 0 || o.GetNumSubpartitions() != 1 {
				return fmt.Errorf("task: restore output state: the chain has no output %d to vertex %s", o.GetSubpartition(), o.GetTargetVertex())
			}
			for _, b := range o.GetBatches() {
				t.next.chainReplay = append(t.next.chainReplay, exchange.Buffer{Kind: exchange.KindRecords, Records: state.Records(b)})
			}
		}
		return nil
	}
	batches := make([][][]exchange.Buffer, len(t.writers))
	for i, w := range t.writers {
		batches[i] = make([][]exchange.Buffer, w.NumSubpartitions())
	}
	for _, o := range cs.GetOutputs() {
		p := int(o.GetPartition())
		if p < 0 || p >= len(outs) || outs[p].GetTargetVertex() != o.GetTargetVertex() {
			return fmt.Errorf("task: restore output state: the job has no output %d to vertex %s", p, o.GetTargetVertex())
		}
		if n := outs[p].GetNumSubpartitions(); n != o.GetNumSubpartitions() {
			return fmt.Errorf("task: restore output state to %s: %w: written for %d consumer subtasks, the job has %d",
				o.GetTargetVertex(), state.ErrChannelStateRescale, o.GetNumSubpartitions(), n)
		}
		sub := int(o.GetSubpartition())
		if sub < 0 || sub >= len(batches[p]) {
			return fmt.Errorf("task: restore output state to %s: no subpartition %d", o.GetTargetVertex(), sub)
		}
		for _, b := range o.GetBatches() {
			batches[p][sub] = append(batches[p][sub], exchange.Buffer{Kind: exchange.KindRecords, Records: state.Records(b)})
		}
	}
	for i, w := range t.writers {
		if err := w.Restore(batches[i]); err != nil {
			return err
		}
	}
	return nil
}

// restoreInput sets the recovered input state aside to be processed before
// the channels are read.
func (t *Task) restoreInput(cs *weirv1.ChannelStateSnapshot) error {
	t.replay = make([][]exchange.Buffer, len(t.inputs))
	gates := t.desc.GetInputs()
	for _, in := range cs.GetInputs() {
		g := int(in.GetGate())
		if g < 0 || g >= len(gates) || gates[g].GetSourceVertex() != in.GetSourceVertex() {
			return fmt.Errorf("task: restore input state: the job has no input %d from vertex %s", g, in.GetSourceVertex())
		}
		if n := len(gates[g].GetChannels()); n != int(in.GetNumChannels()) {
			return fmt.Errorf("task: restore input state from %s: %w: written for %d producer subtasks, the job has %d",
				in.GetSourceVertex(), state.ErrChannelStateRescale, in.GetNumChannels(), n)
		}
		ch := -1
		for flat := range t.inputs {
			if t.gate[flat] == g && t.gateIndex[flat] == int(in.GetChannel()) {
				ch = flat
			}
		}
		if ch < 0 {
			return fmt.Errorf("task: restore input state from %s: no channel %d", in.GetSourceVertex(), in.GetChannel())
		}
		for _, b := range in.GetBatches() {
			t.replay[ch] = append(t.replay[ch], exchange.Buffer{Kind: exchange.KindRecords, Records: state.Records(b)})
		}
	}
	if t.prev != nil && len(t.chainReplay) > 0 {
		t.replay[0] = append(t.replay[0], t.chainReplay...)
		t.chainReplay = nil
	}
	return nil
}
