//go:build failpoints

package sim

import (
	"testing"

	"github.com/weirproject/weir/internal/putback"
)

// TestSimulationFindsBugs puts each fixed bug back and checks that the
// simulation finds it within a bounded number of seeds: the proof that
// its invariants and faults reach those interleavings. A bug that needs
// a rare fault is looked for with that fault made common (focus).
func TestSimulationFindsBugs(t *testing.T) {
	const budget = 2000
	// A bug that needs two client calls to meet is given more seeds.
	budgets := map[string]uint64{putback.CheckpointAfterRescale: 5000, putback.AdoptUnrecorded: 3000}
	focus := map[string]Config{
		// A rescale etcd refuses, of a job with a broadcast edge and
		// unaligned checkpoints, that completes a checkpoint before the
		// store answers.
		putback.UnalignedWhileUnstored: {GraphStoreFailP: 1},
		// A stop with a savepoint beside a rescale (refused) and
		// checkpoints running two at a time.
		putback.CheckpointAfterRescale: {StopP: 1},
		// A leader change while a TaskManager cut off still runs attempts
		// the old leader replaced elsewhere.
		putback.AdoptUnrecorded: {LeaderChangeP: 1, PartitionRate: 0.5},
	}
	for _, bug := range putback.All {
		t.Run(bug, func(t *testing.T) {
			undo := putback.Reintroduce(bug)
			defer undo()
			n := uint64(budget)
			if b, ok := budgets[bug]; ok {
				n = b
			}
			for seed := range n {
				cfg := focus[bug]
				cfg.Seed = seed
				if r := Run(cfg); r.Err != nil {
					t.Logf("found by seed %d (%s) after %d seeds: %v", seed, r.Job, seed+1, r.Err)
					return
				}
			}
			t.Fatalf("%d seeds did not find %s", n, bug)
		})
	}
}
