//go:build failpoints

package kafka

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/internal/kafka/sinktxn"
)

// TestKafkaNemesisFindsBugs puts back, one at a time, each bug the
// transaction machine once had, and requires the nemesis to find it
// within a bounded number of sequences on both protocols: a nemesis that
// passes a broken sink proves nothing.
func TestKafkaNemesisFindsBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("with -short")
	}
	for _, name := range []string{"fence-restored", "reuse-committed", "carry-forever"} {
		t.Run(name, func(t *testing.T) {
			undo := sinktxn.Reintroduce(sinktxn.Bugs[name])
			defer undo()
			for _, proto := range nemProtocols() {
				var found atomic.Int64 // the first failing seed + 1
				var ran atomic.Int64
				seeds := make(chan uint64)
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						for seed := range seeds {
							if found.Load() != 0 {
								continue
							}
							ran.Add(1)
							if r := runNemesis(t, proto, seed, *nemesisSteps); r.verdict != "" {
								found.CompareAndSwap(0, int64(seed)+1)
								t.Logf("%s on %s: seed %d: %s", name, proto, seed, r.verdict)
							}
						}
					})
				}
				for seed := range uint64(200) {
					if found.Load() != 0 {
						break
					}
					seeds <- seed
				}
				close(seeds)
				wg.Wait()
				if found.Load() == 0 {
					t.Errorf("%s on %s: %d sequences found nothing", name, proto, ran.Load())
				} else {
					t.Logf("%s on %s: found after %d sequences", name, proto, ran.Load())
				}
			}
		})
	}
}
