package jobmanager

import (
	"fmt"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// execution is one subtask attempt placed on a TaskManager.
type execution struct {
	attempt *weirv1.ExecutionAttemptID
	vertex  *weirv1.JobVertex
	source  bool
	tm      *taskManager
	state   weirv1.ExecutionState
	failure string
	// endOfInput: the subtask received all its input.
	endOfInput bool
	// finalLoad is what a FINISHED subtask reported last.
	finalLoad *weirv1.SubtaskInfo_Load
}

func (e *execution) terminal() bool {
	switch e.state {
	case weirv1.ExecutionState_EXECUTION_STATE_FINISHED, weirv1.ExecutionState_EXECUTION_STATE_CANCELED, weirv1.ExecutionState_EXECUTION_STATE_FAILED:
		return true
	}
	return false
}

func (e *execution) name() string {
	return fmt.Sprintf("%s (%d/%d)", e.vertex.GetName(), e.attempt.GetSubtaskIndex()+1, e.vertex.GetParallelism())
}

// slotsNeeded is the number of slots a job takes: like Flink's default slot
// sharing group, slot i holds subtask i of every vertex.
func slotsNeeded(g *weirv1.JobGraph) int {
	n := 0
	for _, v := range g.GetVertices() {
		n = max(n, int(v.GetParallelism()))
	}
	return n
}

// expand turns the job graph into executions placed on slots.
func expand(jobID, session string, g *weirv1.JobGraph, slots []*taskManager, attempt int32) ([]*execution, error) {
	order, err := jobgraph.TopologicalOrder(g)
	if err != nil {
		return nil, err
	}
	var execs []*execution
	for _, v := range order {
		for i := int32(0); i < v.GetParallelism(); i++ {
			execs = append(execs, &execution{
				attempt: &weirv1.ExecutionAttemptID{JobId: jobID, Vertex: v.GetName(), SubtaskIndex: i, Attempt: attempt, Session: session},
				vertex:  v,
				source:  len(v.GetInputs()) == 0,
				tm:      slots[i],
				state:   weirv1.ExecutionState_EXECUTION_STATE_SCHEDULED,
			})
		}
	}
	return execs, nil
}

// descriptors builds what each execution's TaskManager needs to run it.
func descriptors(g *weirv1.JobGraph, execs []*execution, checkpointDir string, restore *restorePoint) ([]*weirv1.TaskDeploymentDescriptor, error) {
	byVertex := map[string][]*execution{}
	for _, e := range execs {
		byVertex[e.vertex.GetName()] = append(byVertex[e.vertex.GetName()], e)
	}
	cp := g.GetCheckpointing()
	opts := &weirv1.CheckpointOptions{
		Type:                       weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT,
		ExactlyOnce:                cp.GetMode() != weirv1.CheckpointingMode_CHECKPOINTING_MODE_AT_LEAST_ONCE,
		Unaligned:                  cp.GetUnaligned(),
		AlignedCheckpointTimeoutMs: cp.GetAlignedCheckpointTimeout().AsDuration().Milliseconds(),
		Incremental:                g.GetState().GetIncremental(),
	}
	var out []*weirv1.TaskDeploymentDescriptor
	for _, e := range execs {
		v := e.vertex
		d := &weirv1.TaskDeploymentDescriptor{
			Attempt: e.attempt, JobName: g.GetName(), Operator: v.GetOperator(), Config: v.GetConfig(),
			Parallelism: v.GetParallelism(), MaxParallelism: g.GetMaxParallelism(),
			CheckpointOptions: opts, CheckpointDir: checkpointDir, StateBackend: g.GetState(),
			Restore:    restore.taskRestore(v.GetName(), int(e.attempt.GetSubtaskIndex()), int(v.GetParallelism()), int(g.GetMaxParallelism())),
			Watermarks: v.GetWatermarks(),
		}
		seen := map[string]bool{}
		for _, in := range v.GetInputs() {
			if seen[in.GetSource()] {
				return nil, fmt.Errorf("jobmanager: vertex %q reads %q twice", v.GetName(), in.GetSource())
			}
			seen[in.GetSource()] = true
			gate := &weirv1.InputGateDescriptor{SourceVertex: in.GetSource(), Partitioner: in.GetPartitioner()}
			producers := byVertex[in.GetSource()]
			for j, p := range producers {
				sub := e.attempt.GetSubtaskIndex()
				if in.GetPartitioner() == weirv1.Partitioner_PARTITIONER_FORWARD {
					if int32(j) != sub {
						continue
					}
					sub = 0
				}
				gate.Channels = append(gate.Channels, &weirv1.InputChannelDescriptor{
					Partition:             &weirv1.ResultPartitionID{Producer: p.attempt, ConsumerVertex: v.GetName()},
					Subpartition:          sub,
					ProducerAddress:       p.tm.addr,
					ProducerTaskmanagerId: p.tm.id,
				})
			}
			d.Inputs = append(d.Inputs, gate)
		}
		for _, c := range jobgraph.Consumers(g, v.GetName()) {
			n := int32(len(byVertex[c.Vertex]))
			if c.Partitioner == weirv1.Partitioner_PARTITIONER_FORWARD {
				n = 1
			}
			d.Outputs = append(d.Outputs, &weirv1.OutputDescriptor{TargetVertex: c.Vertex, Partitioner: c.Partitioner, NumSubpartitions: n, Output: c.Output})
		}
		out = append(out, d)
	}
	return out, nil
}
