package scheduler

import (
	"slices"
	"time"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// View is a copy of the job's state for the API.
type View struct {
	State      weirv1.JobState
	Cause      string
	Restarts   int32
	Start, End time.Time
	Execs      []Exec
	Regions    int
	// Restarting lists the regions being restarted.
	Restarting []int
	Exceptions []Exception
	Generation int64
	// Graph is the graph the job runs or is being rescaled to.
	Graph *weirv1.JobGraph
}

// View copies the job's state.
func (j *Job) View() View {
	v := View{
		State: j.state, Cause: j.cause, Restarts: j.restarts, Start: j.start, End: j.end, Regions: j.regions,
		Generation: j.generation, Exceptions: slices.Clone(j.exceptions), Graph: j.Graph(),
	}
	for _, e := range j.execs {
		v.Execs = append(v.Execs, *e)
	}
	for r := range j.busy {
		v.Restarting = append(v.Restarting, r)
	}
	slices.Sort(v.Restarting)
	return v
}

// SlotsHeld counts the slots the job's live subtasks hold per
// TaskManager.
func (v View) SlotsHeld() map[string]int {
	held := map[string]int{}
	if Terminal(v.State) {
		return held
	}
	seen := map[string]map[SlotKey]bool{}
	for _, e := range v.Execs {
		if e.Terminal() || e.TaskManager == "" {
			continue
		}
		if seen[e.TaskManager] == nil {
			seen[e.TaskManager] = map[SlotKey]bool{}
		}
		if !seen[e.TaskManager][e.Slot] {
			seen[e.TaskManager][e.Slot] = true
			held[e.TaskManager]++
		}
	}
	return held
}
