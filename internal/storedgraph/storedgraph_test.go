package storedgraph

import "testing"

// TestTracker walks the orders in which a job's graph changes and the
// store's answers arrive.
func TestTracker(t *testing.T) {
	type step struct {
		do      func(*Tracker, []Change) []Change
		lagging bool
		retry   map[int]bool // by index into the changes begun so far
	}
	begin := func(t *Tracker, cs []Change) []Change { return append(cs, t.Begin()) }
	abandon := func(i int) func(*Tracker, []Change) []Change {
		return func(t *Tracker, cs []Change) []Change { t.Abandon(cs[i]); return cs }
	}
	stored := func(i int) func(*Tracker, []Change) []Change {
		return func(t *Tracker, cs []Change) []Change { t.Stored(cs[i]); return cs }
	}
	current := func(t *Tracker, cs []Change) []Change { t.StoredCurrent(); return cs }
	end := func(t *Tracker, cs []Change) []Change { t.End(); return cs }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"stored at once", []step{
			{do: begin, lagging: true, retry: map[int]bool{0: true}},
			{do: stored(0), lagging: false, retry: map[int]bool{0: false}},
		}},
		{"refused by the scheduler", []step{
			{do: begin, lagging: true},
			{do: abandon(0), lagging: false, retry: map[int]bool{0: false}},
		}},
		{"a refused change leaves an earlier one to store", []step{
			{do: begin, lagging: true},
			{do: begin, lagging: true, retry: map[int]bool{0: false, 1: true}},
			{do: abandon(1), lagging: true, retry: map[int]bool{0: true}},
			{do: stored(0), lagging: false, retry: map[int]bool{0: false}},
		}},
		{"a later change stored holds the earlier", []step{
			{do: begin, lagging: true},
			{do: begin, lagging: true},
			{do: stored(1), lagging: false, retry: map[int]bool{0: false, 1: false}},
			// The earlier one's background store answers late.
			{do: stored(0), lagging: false, retry: map[int]bool{0: false, 1: false}},
		}},
		{"a checkpointing change stores what the job runs", []step{
			{do: begin, lagging: true},
			{do: current, lagging: false, retry: map[int]bool{0: false}},
		}},
		{"an abandon after the store took it changes nothing", []step{
			{do: begin, lagging: true},
			{do: stored(0), lagging: false},
			{do: abandon(0), lagging: false},
			{do: begin, lagging: true, retry: map[int]bool{1: true}},
		}},
		{"the job ended", []step{
			{do: begin, lagging: true},
			{do: end, lagging: false, retry: map[int]bool{0: false}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tracker
			var cs []Change
			for i, s := range tc.steps {
				cs = s.do(&tr, cs)
				if got := tr.Lagging(); got != s.lagging {
					t.Fatalf("step %d: lagging %t, want %t", i, got, s.lagging)
				}
				for c, want := range s.retry {
					if got := tr.Retry(cs[c]); got != want {
						t.Fatalf("step %d: retry change %d: %t, want %t", i, c, got, want)
					}
				}
			}
		})
	}
}
