//go:build failpoints

package sim

import (
	"testing"

	"github.com/weirproject/weir/internal/putback"
)

// TestSimulationFindsBugs puts each fixed bug back and checks that the
// simulation finds it within a bounded number of seeds: the proof that
// its invariants and faults reach those interleavings.
func TestSimulationFindsBugs(t *testing.T) {
	const budget = 2000
	for _, bug := range putback.All {
		t.Run(bug, func(t *testing.T) {
			undo := putback.Reintroduce(bug)
			defer undo()
			for seed := range uint64(budget) {
				if r := Run(Config{Seed: seed}); r.Err != nil {
					t.Logf("found by seed %d (%s) after %d seeds: %v", seed, r.Job, seed+1, r.Err)
					return
				}
			}
			t.Fatalf("%d seeds did not find %s", budget, bug)
		})
	}
}
