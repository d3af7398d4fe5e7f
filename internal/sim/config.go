package sim

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Config is one simulation run. Zero fields take the defaults of
// Defaults; every other choice is drawn from Seed.
type Config struct {
	Seed uint64
	// TaskManagers and Slots each: the cluster.
	TaskManagers, Slots int
	// FaultTime is how long faults are injected; after it the network
	// heals, crashed TaskManagers come back, and the liveness deadline runs.
	FaultTime time.Duration
	// Liveness is how long after the faults stop a bounded job must have
	// ended, and an unbounded one completed a checkpoint.
	Liveness time.Duration
	// Per message: drop, duplicate, delay by up to seconds.
	DropP, DupP, SlowP float64
	// Per second of simulated time: a TaskManager crashes, is cut off
	// from the others for a while, a running subtask fails.
	CrashRate, PartitionRate, TaskFailRate float64
	// CommitFailP: a sink fails committing a checkpoint it is notified of.
	CommitFailP float64
	// GraphStoreFailP: etcd does not take a rescaled graph before the
	// client's deadline; each retry in the background fails with
	// (1+GraphStoreFailP)/2, so the stored graph lags a while.
	GraphStoreFailP float64
	// ConnectionResetP: the connection to a live TaskManager breaks under
	// a cancel (the JobManager sees Unavailable and drops it).
	ConnectionResetP float64
	// StopP: the client stops the job with a savepoint at some moment
	// (in a seed without a leader change or a cancel).
	StopP float64
	// LeaderChangeP: the JobManager leader is deposed at some moment, and
	// a new one adopts the job.
	LeaderChangeP float64
	// Trace keeps the whole trace, not only its end.
	Trace bool
}

// Defaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.TaskManagers == 0 {
		c.TaskManagers = 3
	}
	if c.Slots == 0 {
		c.Slots = 2
	}
	if c.FaultTime == 0 {
		c.FaultTime = 20 * time.Second
	}
	if c.Liveness == 0 {
		c.Liveness = 3 * time.Minute
	}
	def(&c.DropP, 0.02)
	def(&c.DupP, 0.01)
	def(&c.SlowP, 0.03)
	def(&c.CrashRate, 0.03)
	def(&c.PartitionRate, 0.02)
	def(&c.TaskFailRate, 0.05)
	def(&c.CommitFailP, 0.05)
	def(&c.GraphStoreFailP, 0.1)
	def(&c.ConnectionResetP, 0.03)
	def(&c.StopP, 0.125)
	def(&c.LeaderChangeP, 0.25)
	return c
}

// The daemons' timing, scaled as in production (heartbeats every second,
// lost after five).
const (
	heartbeatInterval = time.Second
	heartbeatTimeout  = 5 * time.Second
	rpcTimeout        = 2 * time.Second
	// orphanTimeout is how long a TaskManager's subtasks run on without a
	// registration, for a new leader to adopt.
	orphanTimeout     = 30 * time.Second
	restartDelay      = time.Second
	checkpointEvery   = time.Second
	checkpointTimeout = 10 * time.Second
)

// vertex is a simulated operator: a source, a middle or a sink.
type vertex struct {
	name        string
	parallelism int32
	inputs      []string // upstream vertex names
	forward     bool     // its inputs are forward edges, else hash (or broadcast)
	// broadcast: its inputs are broadcast edges; an unaligned checkpoint
	// records records in flight on them, which restore at this
	// parallelism only.
	broadcast bool
	source    bool
	sink      bool
}

// jobShape draws a job: one or two pipelines of source → (map) → sink,
// each edge forward, hash or broadcast, parallelism 1 or 2, checkpoints
// aligned or unaligned, one or two at a time. A forward pipeline at
// parallelism 2 is two pipelined regions; a hash edge joins them.
func (w *world) jobShape() (*weirv1.JobGraph, map[string]*vertex, bool) {
	bounded := w.rng.IntN(3) > 0
	g := &weirv1.JobGraph{
		Name: "sim", MaxParallelism: 128,
		Checkpointing: &weirv1.CheckpointConfig{
			Interval: durationpb.New(checkpointEvery), Timeout: durationpb.New(checkpointTimeout),
			MaxConcurrent: int32(1 + w.rng.IntN(2)), TolerableFailedCheckpoints: -1, Retained: 3,
			Unaligned: w.rng.IntN(2) == 0,
		},
		RestartStrategy: &weirv1.RestartStrategy{
			Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 1 << 20, Delay: durationpb.New(restartDelay),
		},
	}
	vs := map[string]*vertex{}
	add := func(v *vertex, edge weirv1.Partitioner) {
		jv := &weirv1.JobVertex{Name: v.name, Parallelism: v.parallelism, Operator: "sim"}
		for _, in := range v.inputs {
			jv.Inputs = append(jv.Inputs, &weirv1.JobEdge{Source: in, Partitioner: edge})
		}
		g.Vertices = append(g.Vertices, jv)
		vs[v.name] = v
	}
	for p := range 1 + w.rng.IntN(2) {
		par := int32(1 + w.rng.IntN(2))
		edge := weirv1.Partitioner_PARTITIONER_FORWARD
		switch w.rng.IntN(4) {
		case 0:
			edge = weirv1.Partitioner_PARTITIONER_HASH
		case 1:
			edge = weirv1.Partitioner_PARTITIONER_BROADCAST
		}
		fwd, bc := edge == weirv1.Partitioner_PARTITIONER_FORWARD, edge == weirv1.Partitioner_PARTITIONER_BROADCAST
		src := &vertex{name: fmt.Sprintf("src%d", p), parallelism: par, source: true}
		add(src, edge)
		last := src.name
		if w.rng.IntN(2) == 0 {
			mid := &vertex{name: fmt.Sprintf("map%d", p), parallelism: par, inputs: []string{last}, forward: fwd, broadcast: bc}
			add(mid, edge)
			last = mid.name
		}
		add(&vertex{name: fmt.Sprintf("sink%d", p), parallelism: par, inputs: []string{last}, sink: true,
			forward: fwd, broadcast: bc}, edge)
	}
	return g, vs, bounded
}
