package jobmanager

import (
	"fmt"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// descriptors builds what the TaskManager of each subtask in deploy needs
// to run it. all are the job's current attempts: a consumer's channels
// name its producers' current attempts and where they run.
func descriptors(g *weirv1.JobGraph, all, deploy []scheduler.Exec, tms map[string]*taskManager, checkpointDir string, restore *restorePoint) ([]*weirv1.TaskDeploymentDescriptor, error) {
	byVertex := map[string][]scheduler.Exec{}
	for _, e := range all {
		byVertex[e.Vertex.GetName()] = append(byVertex[e.Vertex.GetName()], e)
	}
	opts := checkpointOptions(g)
	opts.Type = weirv1.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT
	var out []*weirv1.TaskDeploymentDescriptor
	for _, e := range deploy {
		v := e.Vertex
		d := &weirv1.TaskDeploymentDescriptor{
			Attempt: e.Attempt, JobName: g.GetName(), Operator: v.GetOperator(), Config: v.GetConfig(),
			Parallelism: v.GetParallelism(), MaxParallelism: g.GetMaxParallelism(),
			CheckpointOptions: opts, CheckpointDir: checkpointDir, StateBackend: g.GetState(),
			Restore:    restore.taskRestore(v.GetName(), int(e.Attempt.GetSubtaskIndex()), int(v.GetParallelism()), int(g.GetMaxParallelism())),
			Watermarks: v.GetWatermarks(), BufferTimeout: g.GetBufferTimeout(),
		}
		seen := map[string]bool{}
		for _, in := range v.GetInputs() {
			if seen[in.GetSource()] {
				return nil, fmt.Errorf("jobmanager: vertex %q reads %q twice", v.GetName(), in.GetSource())
			}
			seen[in.GetSource()] = true
			gate := &weirv1.InputGateDescriptor{SourceVertex: in.GetSource(), Partitioner: in.GetPartitioner()}
			for k, p := range byVertex[in.GetSource()] {
				sub := e.Attempt.GetSubtaskIndex()
				if in.GetPartitioner() == weirv1.Partitioner_PARTITIONER_FORWARD {
					if int32(k) != sub {
						continue
					}
					sub = 0
				}
				tm := tms[p.TaskManager]
				if tm == nil {
					return nil, fmt.Errorf("jobmanager: producer %s of %s is not placed", p.Name(), e.Name())
				}
				gate.Channels = append(gate.Channels, &weirv1.InputChannelDescriptor{
					Partition:             &weirv1.ResultPartitionID{Producer: p.Attempt, ConsumerVertex: v.GetName()},
					Subpartition:          sub,
					ProducerAddress:       tm.addr,
					ProducerTaskmanagerId: tm.id,
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
