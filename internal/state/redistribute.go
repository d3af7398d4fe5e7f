package state

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// oldChannels is one old subtask's channel state, read.
type oldChannels struct {
	st *weirv1.SubtaskState
	cs *weirv1.ChannelStateSnapshot
}

// redistribute lays the in-flight records of an unaligned checkpoint out
// on the channels of the subtask d describes, after the vertex or its
// producers or consumers changed parallelism. kept: the vertex itself kept
// its parallelism, and old holds only this subtask's own state.
//
// A record must end up where it would have gone had it been sent now, and
// behind nothing that was sent after it:
//   - A keyed record (hash edge; forward edge, whose consumer may keep keyed
//     state for the same keys) goes to the subtask that owns its key group
//     now. Recorded input is taken by the consumer owning it; recorded
//     output by the producer with the same index as that consumer, which
//     sends it down the one channel of a forward edge.
//   - Other recorded input and output (rebalance) belongs to no subtask in
//     particular: old subtask i's goes to new subtask i mod parallelism.
//   - Recorded output whose consumers changed number is routed again by
//     the edge's partitioner: by key group, or round robin.
//   - A broadcast edge's copies cannot be split: each consumer is somewhere
//     else in the stream. Refused, naming the edge.
//
// Records of one old channel stay in their order, and input state still
// precedes output state, which precedes what producers send after the
// restore: per key, nothing is reordered.
func redistribute(old []oldChannels, kept bool, d *weirv1.TaskDeploymentDescriptor) (*weirv1.ChannelStateSnapshot, error) {
	subtask, parallelism, maxParallelism := int(d.GetAttempt().GetSubtaskIndex()), int(d.GetParallelism()), int(d.GetMaxParallelism())
	if parallelism <= 0 || maxParallelism <= 0 {
		return nil, fmt.Errorf("state: restore channel state of %s: parallelism %d, max parallelism %d", d.GetAttempt().GetVertex(), parallelism, maxParallelism)
	}
	vertex := d.GetAttempt().GetVertex()
	ownsKey := func(r *weirv1.InFlightRecord) bool {
		return keygroup.OperatorIndex(keygroup.Of(r.GetKey(), maxParallelism), maxParallelism, parallelism) == subtask
	}
	all := func(*weirv1.InFlightRecord) bool { return true }
	// takes is which records of old subtask index this subtask restores on
	// an edge partitioned by p; nil: none.
	takes := func(index int, p weirv1.Partitioner) func(*weirv1.InFlightRecord) bool {
		switch {
		case kept:
			return all
		case p == weirv1.Partitioner_PARTITIONER_HASH || p == weirv1.Partitioner_PARTITIONER_FORWARD:
			return ownsKey
		case index%parallelism == subtask:
			return all
		}
		return nil
	}
	slices.SortFunc(old, func(a, b oldChannels) int { return int(a.st.GetSubtaskIndex() - b.st.GetSubtaskIndex()) })

	inputs := map[channelPlace][]*weirv1.InFlightBatch{}
	outputs := map[channelPlace][]*weirv1.InFlightBatch{}
	next := map[int]int{} // round-robin position per output
	gates, outs := d.GetInputs(), d.GetOutputs()
	for _, o := range old {
		index := int(o.st.GetSubtaskIndex())
		for _, in := range o.cs.GetInputs() {
			g := int(in.GetGate())
			if g < 0 || g >= len(gates) || gates[g].GetSourceVertex() != in.GetSourceVertex() {
				return nil, fmt.Errorf("state: restore channel state of %s: the job has no input %d from vertex %s", vertex, g, in.GetSourceVertex())
			}
			n, ch := len(gates[g].GetChannels()), int(in.GetChannel())
			if n == 0 || ch < 0 || ch >= int(in.GetNumChannels()) {
				return nil, fmt.Errorf("state: restore channel state of %s: input from %s: channel %d of %d, the job has %d", vertex, in.GetSourceVertex(), ch, in.GetNumChannels(), n)
			}
			part := gates[g].GetPartitioner()
			if part == weirv1.Partitioner_PARTITIONER_BROADCAST && !kept && countRecords(in.GetBatches()) > 0 {
				return nil, fmt.Errorf("state: restore channel state of %s: %w: records in flight on its broadcast input from %s, from %d subtasks to %d",
					vertex, ErrChannelStateRescale, in.GetSourceVertex(), o.st.GetParallelism(), parallelism)
			}
			keep := takes(index, part)
			if keep == nil {
				continue
			}
			at := channelPlace{g, ch % n}
			for _, b := range in.GetBatches() {
				if f := filterBatch(b, keep); f != nil {
					inputs[at] = append(inputs[at], f)
				}
			}
		}
		for _, out := range o.cs.GetOutputs() {
			p := int(out.GetPartition())
			if p < 0 || p >= len(outs) || outs[p].GetTargetVertex() != out.GetTargetVertex() {
				return nil, fmt.Errorf("state: restore channel state of %s: the job has no output %d to vertex %s", vertex, p, out.GetTargetVertex())
			}
			n, sub := int(outs[p].GetNumSubpartitions()), int(out.GetSubpartition())
			if n <= 0 || sub < 0 || sub >= int(out.GetNumSubpartitions()) {
				return nil, fmt.Errorf("state: restore channel state of %s: output to %s: subpartition %d of %d, the job has %d", vertex, out.GetTargetVertex(), sub, out.GetNumSubpartitions(), n)
			}
			part := outs[p].GetPartitioner()
			keep := takes(index, part)
			if keep == nil {
				continue
			}
			if int(out.GetNumSubpartitions()) == n {
				at := channelPlace{p, sub}
				for _, b := range out.GetBatches() {
					if f := filterBatch(b, keep); f != nil {
						outputs[at] = append(outputs[at], f)
					}
				}
				continue
			}
			// The consumers changed number: route again.
			var route func(*weirv1.InFlightRecord) int
			switch part {
			case weirv1.Partitioner_PARTITIONER_HASH:
				route = func(r *weirv1.InFlightRecord) int {
					return keygroup.OperatorIndex(keygroup.Of(r.GetKey(), maxParallelism), maxParallelism, n)
				}
			case weirv1.Partitioner_PARTITIONER_REBALANCE:
				if _, ok := next[p]; !ok {
					next[p] = subtask % n
				}
				route = func(*weirv1.InFlightRecord) int {
					i := next[p]
					next[p] = (i + 1) % n
					return i
				}
			default:
				if countRecords(out.GetBatches()) == 0 {
					continue
				}
				return nil, fmt.Errorf("state: restore channel state of %s: %w: records in flight on its %s output to %s, from %d consumers to %d",
					vertex, ErrChannelStateRescale, partitionerName(part), out.GetTargetVertex(), out.GetNumSubpartitions(), n)
			}
			for _, b := range out.GetBatches() {
				split := map[int]*weirv1.InFlightBatch{}
				var order []int
				for _, r := range b.GetRecords() {
					if !keep(r) {
						continue
					}
					i := route(r)
					if split[i] == nil {
						split[i] = &weirv1.InFlightBatch{}
						order = append(order, i)
					}
					split[i].Records = append(split[i].Records, r)
				}
				for _, i := range order {
					at := channelPlace{p, i}
					outputs[at] = append(outputs[at], split[i])
				}
			}
		}
	}

	cs := &weirv1.ChannelStateSnapshot{}
	for _, at := range sortedPlaces(inputs) {
		g := gates[at.at]
		cs.Inputs = append(cs.Inputs, &weirv1.InputChannelState{
			Gate: int32(at.at), Channel: int32(at.sub), NumChannels: int32(len(g.GetChannels())), SourceVertex: g.GetSourceVertex(), Batches: inputs[at],
		})
	}
	for _, at := range sortedPlaces(outputs) {
		o := outs[at.at]
		cs.Outputs = append(cs.Outputs, &weirv1.ResultSubpartitionState{
			Partition: int32(at.at), Subpartition: int32(at.sub), NumSubpartitions: o.GetNumSubpartitions(), TargetVertex: o.GetTargetVertex(), Batches: outputs[at],
		})
	}
	if len(cs.Inputs) == 0 && len(cs.Outputs) == 0 {
		return nil, nil
	}
	return cs, nil
}

// filterBatch is b with the records keep accepts; nil when none is.
func filterBatch(b *weirv1.InFlightBatch, keep func(*weirv1.InFlightRecord) bool) *weirv1.InFlightBatch {
	var recs []*weirv1.InFlightRecord
	for _, r := range b.GetRecords() {
		if keep(r) {
			recs = append(recs, r)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return &weirv1.InFlightBatch{Records: recs}
}

func countRecords(bs []*weirv1.InFlightBatch) int {
	n := 0
	for _, b := range bs {
		n += len(b.GetRecords())
	}
	return n
}

// channelPlace is an input channel (gate, channel) or an output
// subpartition (output, subpartition).
type channelPlace struct{ at, sub int }

func sortedPlaces[V any](m map[channelPlace]V) []channelPlace {
	keys := make([]channelPlace, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b channelPlace) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return a.sub - b.sub
	})
	return keys
}

func partitionerName(p weirv1.Partitioner) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PARTITIONER_"))
}
