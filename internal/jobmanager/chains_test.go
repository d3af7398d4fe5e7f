package jobmanager

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// A subtask is deployed in its upstream subtask's chain only when the
// graph chains them and both are deployed now, on the same TaskManager.
func TestDeployChains(t *testing.T) {
	g, err := jobgraph.ParseSpec([]byte(`name: j
vertices:
  - {name: src, operator: o, parallelism: 2}
  - {name: map, operator: o, parallelism: 2, inputs: [{from: src}]}
  - {name: sink, operator: o, parallelism: 2, inputs: [{from: map}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	vertex := map[string]*weirv1.JobVertex{}
	for _, v := range g.GetVertices() {
		vertex[v.GetName()] = v
	}
	exec := func(v string, i int32, tm string) scheduler.Exec {
		return scheduler.Exec{Attempt: &weirv1.ExecutionAttemptID{Vertex: v, SubtaskIndex: i}, Vertex: vertex[v], TaskManager: tm}
	}
	for _, tc := range []struct {
		name  string
		execs []scheduler.Exec
		want  string
	}{
		{"whole job", []scheduler.Exec{exec("sink", 0, "a"), exec("src", 0, "a"), exec("map", 0, "a"), exec("src", 1, "b"), exec("map", 1, "b"), exec("sink", 1, "b")},
			"[src/0 map/0 sink/0] [src/1 map/1 sink/1]"},
		{"upstream not deployed now", []scheduler.Exec{exec("map", 0, "a"), exec("sink", 0, "a")}, "[map/0 sink/0]"},
		{"another TaskManager", []scheduler.Exec{exec("src", 0, "a"), exec("map", 0, "b"), exec("sink", 0, "b")}, "[map/0 sink/0] [src/0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range chains(g, tc.execs) {
				var names []string
				for _, i := range c {
					names = append(names, fmt.Sprintf("%s/%d", tc.execs[i].Attempt.GetVertex(), tc.execs[i].Attempt.GetSubtaskIndex()))
				}
				got = append(got, fmt.Sprint(names))
			}
			slices.Sort(got)
			if s := fmt.Sprint(got); s != "["+tc.want+"]" {
				t.Fatalf("chains %s, want [%s]", s, tc.want)
			}
		})
	}
}
