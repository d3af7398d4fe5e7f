package sim

import (
	"flag"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	simSeeds = flag.Int("sim.seeds", 0, "simulations to run (0: the short run of make test)")
	simSeed  = flag.Uint64("sim.seed", 0, "the first seed; run i uses seed+i")
	simTrace = flag.Bool("sim.trace", false, "print the whole trace of every run (use with -sim.seeds=1)")
)

// shortRun is how many seeds make test runs.
const shortRun = 1000

// TestSimulation runs seeds sim.seed … sim.seed+sim.seeds-1 and fails on
// the first that breaks an invariant, printing its trace and the command
// that replays it.
func TestSimulation(t *testing.T) {
	n := *simSeeds
	if n == 0 {
		n = shortRun
		if testing.Short() {
			n = 100
		}
	}
	start := time.Now()
	faults := map[string]int{}
	var steps int
	var simulated time.Duration
	ends := map[string]int{}
	for r := range runSeeds(*simSeed, n, *simTrace) {
		seed := r.Seed
		if *simTrace {
			t.Logf("seed %d trace:\n%s", seed, r.Trace)
		}
		if r.Err != nil {
			t.Fatalf("seed %d (%s): %v\n\nreplay: go test ./internal/sim -run 'TestSimulation$' -args -sim.seeds=1 -sim.seed=%d -sim.trace\n\ntrace (end):\n%s",
				seed, r.Job, r.Err, seed, r.Trace)
		}
		for k, v := range r.Faults {
			faults[k] += v
		}
		steps += r.Steps
		simulated += r.Elapsed
		end := "running"
		if r.End != 0 {
			end = r.End.FlinkName()
		}
		ends[end]++
	}
	took := time.Since(start)
	var fs []string
	for _, k := range slices.Sorted(maps.Keys(faults)) {
		fs = append(fs, fmt.Sprintf("%s=%d", k, faults[k]))
	}
	t.Logf("%d seeds in %s (%.0f per minute): %d steps, %s simulated; faults: %s; ends: %v",
		n, took.Round(time.Millisecond), float64(n)/took.Minutes(), steps, simulated.Round(time.Second), strings.Join(fs, " "), ends)
}

// runSeeds runs n seeds from first on every CPU and yields the results
// in seed order, stopping after the first failure.
func runSeeds(first uint64, n int, trace bool) iter.Seq[Result] {
	return func(yield func(Result) bool) {
		workers := runtime.GOMAXPROCS(0)
		results := make([]chan Result, n)
		for i := range results {
			results[i] = make(chan Result, 1)
		}
		next := make(chan int)
		stop := make(chan struct{})
		defer close(stop)
		for range workers {
			go func() {
				for i := range next {
					results[i] <- Run(Config{Seed: first + uint64(i), Trace: trace})
				}
			}()
		}
		go func() {
			defer close(next)
			for i := range n {
				select {
				case next <- i:
				case <-stop:
					return
				}
			}
		}()
		for i := range n {
			r := <-results[i]
			if !yield(r) || r.Err != nil {
				return
			}
		}
	}
}

// TestSimulationReplays: a seed replays bit for bit.
func TestSimulationReplays(t *testing.T) {
	for seed := range uint64(20) {
		a, b := Run(Config{Seed: seed}), Run(Config{Seed: seed})
		if a.Hash != b.Hash || a.Steps != b.Steps {
			t.Fatalf("seed %d: two runs differ: %d steps (hash %x) and %d steps (hash %x)", seed, a.Steps, a.Hash, b.Steps, b.Hash)
		}
	}
}
