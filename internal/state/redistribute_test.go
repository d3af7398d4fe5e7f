package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/keygroup"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

const (
	hash      = weirv1.Partitioner_PARTITIONER_HASH
	forward   = weirv1.Partitioner_PARTITIONER_FORWARD
	rebalance = weirv1.Partitioner_PARTITIONER_REBALANCE
	broadcast = weirv1.Partitioner_PARTITIONER_BROADCAST
	testMaxP  = 128
)

type gate struct {
	from     string
	part     weirv1.Partitioner
	channels int
}

type output struct {
	to   string
	part weirv1.Partitioner
	subs int
}

// descriptor is subtask of vertex (at parallelism) with the given input
// gates and outputs, as the JobManager deploys it.
func descriptor(vertex string, subtask, parallelism int, gates []gate, outs []output) *weirv1.TaskDeploymentDescriptor {
	d := &weirv1.TaskDeploymentDescriptor{
		Attempt:     &weirv1.ExecutionAttemptID{Vertex: vertex, SubtaskIndex: int32(subtask)},
		Parallelism: int32(parallelism), MaxParallelism: testMaxP,
	}
	for _, g := range gates {
		d.Inputs = append(d.Inputs, &weirv1.InputGateDescriptor{SourceVertex: g.from, Partitioner: g.part, Channels: make([]*weirv1.InputChannelDescriptor, g.channels)})
	}
	for _, o := range outs {
		d.Outputs = append(d.Outputs, &weirv1.OutputDescriptor{TargetVertex: o.to, Partitioner: o.part, NumSubpartitions: int32(o.subs)})
	}
	return d
}

// inFlight is what an unaligned checkpoint of vertex "mid" recorded at
// parallelism p: on every input channel from "up" (parallelism up) and
// every output subpartition towards "down" (parallelism down), a few
// batches of keyed records, each record named by where it was, so the
// test can tell where it went.
func inFlight(t *testing.T, rng *rand.Rand, p, up, down int, inPart, outPart weirv1.Partitioner) []*weirv1.SubtaskState {
	t.Helper()
	dir := t.TempDir()
	var prev []*weirv1.SubtaskState
	for i := range p {
		cs := &weirv1.ChannelStateSnapshot{}
		for ch := range up {
			in := &weirv1.InputChannelState{Gate: 0, Channel: int32(ch), NumChannels: int32(up), SourceVertex: "up"}
			for b := range 1 + rng.IntN(3) {
				var recs []sdk.Record
				for k := range rng.IntN(8) {
					key := fmt.Sprintf("k%d", rng.IntN(40))
					if inPart == hash && keygroup.OperatorIndex(keygroup.Of([]byte(key), testMaxP), testMaxP, p) != i {
						continue // a hash edge only sent i its own keys
					}
					recs = append(recs, sdk.Record{Key: []byte(key), Value: fmt.Appendf(nil, "in/%d/%d/%d/%d", i, ch, b, k)})
				}
				in.Batches = append(in.Batches, InFlightBatch(recs))
			}
			cs.Inputs = append(cs.Inputs, in)
		}
		for sub := range down {
			out := &weirv1.ResultSubpartitionState{Partition: 0, Subpartition: int32(sub), NumSubpartitions: int32(down), TargetVertex: "down"}
			for b := range 1 + rng.IntN(3) {
				var recs []sdk.Record
				for k := range rng.IntN(8) {
					key := fmt.Sprintf("k%d", rng.IntN(40))
					if outPart == hash && keygroup.OperatorIndex(keygroup.Of([]byte(key), testMaxP), testMaxP, down) != sub {
						continue
					}
					recs = append(recs, sdk.Record{Key: []byte(key), Value: fmt.Appendf(nil, "out/%d/%d/%d/%d", i, sub, b, k)})
				}
				out.Batches = append(out.Batches, InFlightBatch(recs))
			}
			cs.Outputs = append(cs.Outputs, out)
		}
		h, err := WriteChannelState(nil, dir, "mid", i, cs, 0)
		if err != nil {
			t.Fatal(err)
		}
		prev = append(prev, &weirv1.SubtaskState{Vertex: "mid", SubtaskIndex: int32(i), Parallelism: int32(p), ChannelState: h})
	}
	return prev
}

// landed is where one record was restored.
type landed struct {
	subtask, channel int
	key              string
}

// restoreEverySubtask restores every new subtask and returns where each record
// (by value) landed, input and output separately, in the order each
// channel replays them.
func restoreEverySubtask(t *testing.T, prev []*weirv1.SubtaskState, p, up, down int, inPart, outPart weirv1.Partitioner) (in, out map[string]landed, order map[landed][]string) {
	t.Helper()
	in, out, order = map[string]landed{}, map[string]landed{}, map[landed][]string{}
	for i := range p {
		d := descriptor("mid", i, p, []gate{{"up", inPart, up}}, []output{{"down", outPart, down}})
		cs, err := RestoreChannelState(nil, prev, d)
		if err != nil {
			t.Fatalf("subtask %d of %d: %v", i, p, err)
		}
		if !fits(cs, d) {
			t.Fatalf("subtask %d of %d: restored channel state is not laid out on its channels: %v", i, p, cs)
		}
		// Where each record landed, and per channel and key (outputs
		// under a negative subtask) the order it is replayed in.
		place := func(what string, seen map[string]landed, orderAt, ch int, bs []*weirv1.InFlightBatch) {
			for _, b := range bs {
				for _, r := range b.GetRecords() {
					v := string(r.GetValue())
					if _, dup := seen[v]; dup {
						t.Fatalf("%s record %s restored twice", what, v)
					}
					seen[v] = landed{i, ch, string(r.GetKey())}
					at := landed{orderAt, ch, string(r.GetKey())}
					order[at] = append(order[at], v)
				}
			}
		}
		for _, c := range cs.GetInputs() {
			place("input", in, i, int(c.GetChannel()), c.GetBatches())
		}
		for _, c := range cs.GetOutputs() {
			place("output", out, -1-i, int(c.GetSubpartition()), c.GetBatches())
		}
	}
	return in, out, order
}

func owner(key string, p int) int {
	return keygroup.OperatorIndex(keygroup.Of([]byte(key), testMaxP), testMaxP, p)
}

// An unaligned checkpoint restores at any parallelism of the vertex, its
// producers and its consumers: every recorded record is restored exactly
// once, keyed records where their key group lives now, output sent to the
// consumer its partitioner picks now, and the records of one key in the
// order they were recorded.
func TestChannelStateRedistributes(t *testing.T) {
	type edge struct{ in, out weirv1.Partitioner }
	edges := []edge{{hash, hash}, {hash, rebalance}, {rebalance, hash}, {rebalance, rebalance}, {forward, forward}, {hash, forward}}
	for _, e := range edges {
		for _, shape := range [][2][3]int{ // {old p, up, down}, {new p, up, down}
			{{2, 2, 2}, {3, 2, 2}}, {{3, 2, 2}, {1, 2, 2}}, {{2, 2, 2}, {2, 3, 1}},
			{{2, 3, 2}, {4, 1, 3}}, {{4, 4, 4}, {2, 2, 2}}, {{1, 1, 1}, {3, 3, 3}},
			{{2, 2, 1}, {3, 3, 1}}, {{3, 3, 1}, {2, 2, 1}},
		} {
			from, to := shape[0], shape[1]
			if e.in == forward && (from[1] != from[0] || to[1] != to[0]) || e.out == forward && (from[2] != 1 || to[2] != 1) {
				continue // a forward edge joins equal parallelisms, one channel each way
			}
			name := fmt.Sprintf("%s-%s/%v-to-%v", partitionerName(e.in), partitionerName(e.out), from, to)
			t.Run(name, func(t *testing.T) {
				for seed := range uint64(20) {
					rng := rand.New(rand.NewPCG(seed, 1))
					prev := inFlight(t, rng, from[0], from[1], from[2], e.in, e.out)
					want := recorded(t, prev)
					in, out, order := restoreEverySubtask(t, prev, to[0], to[1], to[2], e.in, e.out)
					if len(in)+len(out) != len(want) {
						t.Fatalf("seed %d: %d records recorded, %d restored", seed, len(want), len(in)+len(out))
					}
					for v, l := range in {
						if (e.in == hash || e.in == forward) && l.subtask != owner(l.key, to[0]) {
							t.Fatalf("seed %d: input record %s of key %s restored at subtask %d, its key group is at %d", seed, v, l.key, l.subtask, owner(l.key, to[0]))
						}
					}
					for v, l := range out {
						if e.out == hash && l.channel != owner(l.key, to[2]) {
							t.Fatalf("seed %d: output record %s of key %s queued for consumer %d, its key group is at %d", seed, v, l.key, l.channel, owner(l.key, to[2]))
						}
						if e.out == forward && l.subtask != owner(l.key, to[0]) {
							t.Fatalf("seed %d: forward output %s of key %s restored at producer %d, its consumer's key group is at %d", seed, v, l.key, l.subtask, owner(l.key, to[0]))
						}
					}
					for at, vs := range order {
						if !inRecordedOrder(vs) {
							t.Fatalf("seed %d: records of key %s at %v out of order: %v", seed, at.key, at, vs)
						}
					}
				}
			})
		}
	}
}

// recorded is every record value in prev's channel state.
func recorded(t *testing.T, prev []*weirv1.SubtaskState) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, st := range prev {
		cs := &weirv1.ChannelStateSnapshot{}
		if err := newRestorer(nil).readHandle(st.GetChannelState(), cs); err != nil {
			t.Fatal(err)
		}
		for _, c := range cs.GetInputs() {
			for _, b := range c.GetBatches() {
				for _, r := range b.GetRecords() {
					out[string(r.GetValue())] = true
				}
			}
		}
		for _, c := range cs.GetOutputs() {
			for _, b := range c.GetBatches() {
				for _, r := range b.GetRecords() {
					out[string(r.GetValue())] = true
				}
			}
		}
	}
	return out
}

// inRecordedOrder reports whether the records named in/old
// subtask/channel/batch/index (or out/…) are in the order they were
// recorded on each old channel; records of different old channels have no
// order between them.
func inRecordedOrder(vs []string) bool {
	last := map[string][2]int{}
	for _, v := range vs {
		p := strings.Split(v, "/")
		var b, i int
		fmt.Sscan(p[3], &b)
		fmt.Sscan(p[4], &i)
		ch := strings.Join(p[:3], "/")
		if l, ok := last[ch]; ok && (b < l[0] || b == l[0] && i <= l[1]) {
			return false
		}
		last[ch] = [2]int{b, i}
	}
	return true
}

// A broadcast edge's records in flight cannot be split: each consumer was
// at its own place in the stream. The restore is refused, naming the
// vertex and the edge; without records in flight there, or at the same
// parallelism, it is not.
func TestChannelStateRefusesBroadcastRescale(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	prev := inFlight(t, rng, 2, 2, 2, broadcast, broadcast)
	for _, c := range []struct {
		p, up, down int
		refused     string
	}{
		{3, 2, 2, "broadcast input from up"},
		{2, 2, 3, "broadcast output to down"},
		{2, 3, 2, ""}, // each subtask keeps its own copy
	} {
		_, err := RestoreChannelState(nil, prev, descriptor("mid", 0, c.p, []gate{{"up", broadcast, c.up}}, []output{{"down", broadcast, c.down}}))
		if c.refused == "" {
			if err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
			continue
		}
		if !errors.Is(err, ErrChannelStateRescale) || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "mid") {
			t.Fatalf("%+v: %v, want ErrChannelStateRescale naming mid and the %s", c, err, c.refused)
		}
		t.Logf("%+v: %v", c, err)
	}
	// Without channel state any parallelism is fine.
	if _, err := RestoreChannelState(nil, []*weirv1.SubtaskState{{Vertex: "mid", Parallelism: 2}}, descriptor("mid", 0, 3, nil, nil)); err != nil {
		t.Fatal(err)
	}
}
