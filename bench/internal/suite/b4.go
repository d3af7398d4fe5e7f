package suite

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
)

// hops is the number of probe vertices in the B4 chain; latency per hop is
// measured between the first and the last, over hops-1 hops.
const hops = 6

// probeChainSpec is source → probe-1 → … → probe-hops, p=2, every edge
// partitioned by partition (forward: each chain stays on its TaskManager,
// as one chained subtask unless unchained; rebalance: every probe subtask
// reads one local and one remote channel).
// rate 0 makes the source idle (idle-source), else sequence-source at rate
// records/s per subtask (-1: unlimited).
func probeChainSpec(name, partition, dir string, rate float64, unchained bool) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "name: %s\ncheckpointing: {interval: 0s, mode: exactly-once, timeout: 1m, retained: 1}\n", name)
	if unchained {
		sb.WriteString("chaining: false\n")
	}
	sb.WriteString("vertices:\n")
	switch {
	case rate == 0:
		sb.WriteString("  - {name: source, operator: idle-source, parallelism: 2}\n")
	default:
		fmt.Fprintf(&sb, "  - {name: source, operator: sequence-source, parallelism: 2, config: {count: 0, keys: 1024, rate: %.0f}}\n", max(rate, 0))
	}
	prev := "source"
	for i := 1; i <= hops; i++ {
		name := fmt.Sprintf("probe-%d", i)
		fmt.Fprintf(&sb, "  - {name: %s, operator: probe, parallelism: 2, inputs: [{from: %s, partition: %s}], config: {dir: %s}}\n",
			name, prev, partition, strconv.Quote(dir))
		prev = name
	}
	return sb.String()
}

// readProbes returns, per checkpoint, per probe vertex (1-based), per
// subtask, the Unix ns the barrier passed.
func readProbes(dir string) (map[int64]map[int]map[int]int64, error) {
	out := map[int64]map[int]map[int]int64{}
	files, err := filepath.Glob(filepath.Join(dir, "*.probe"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		var hop, sub int
		base := strings.TrimSuffix(filepath.Base(f), ".probe")
		if _, err := fmt.Sscanf(strings.Replace(base, "probe-", "", 1), "%d-%d", &hop, &sub); err != nil {
			return nil, fmt.Errorf("probe file %s: %w", f, err)
		}
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var id, ts int64
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &id, &ts); err != nil {
				continue
			}
			if out[id] == nil {
				out[id] = map[int]map[int]int64{}
			}
			if out[id][hop] == nil {
				out[id][hop] = map[int]int64{}
			}
			out[id][hop][sub] = ts
		}
		fh.Close()
	}
	return out, nil
}

// perHop turns probe times into µs per hop: for every checkpoint but the
// skip oldest (the warm-up) and every subtask s, (t[last hop][s] −
// t[first hop][s]) / (hops − 1).
func perHop(p map[int64]map[int]map[int]int64, skip int) []float64 {
	ids := make([]int64, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []float64
	for i, id := range ids {
		if i < skip {
			continue
		}
		byHop := p[id]
		first, last := byHop[1], byHop[hops]
		for s := 0; s < 2; s++ {
			a, ok1 := first[s]
			z, ok2 := last[s]
			if ok1 && ok2 {
				out = append(out, float64(z-a)/1e3/float64(hops-1))
			}
		}
	}
	return out
}

// B4: barrier latency per hop.
func runB4(e *Env, b *Bench) error {
	c, err := e.Cluster("b4", harness.Config{TaskManagers: 2, Slots: 2})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	n, warm := 100, 10
	if e.Quick {
		n, warm = 40, 5
	}
	halfChan := us(e.Floors.ChanRTT) / 2
	halfStream := us(e.Floors.StreamRTT) / 2

	// The chain's capacity, to load it at 50%.
	type variant struct{ key, partition, where string }
	variants := []variant{
		{"forward", "forward", "in-process (forward, chained)"},
		{"forward-unchained", "forward", "in-process (forward, unchained)"},
		{"rebalance", "rebalance", "across TaskManagers (rebalance)"},
	}
	maxRate := map[string]float64{}
	for _, v := range variants {
		dir := filepath.Join(c.Dir(), "probe-max-"+v.key)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		err := runJob(e, c, probeChainSpec("b4-max-"+v.key, v.partition, dir, -1, v.key == "forward-unchained"), func(job string) error {
			if err := sleep(e, 1500*time.Millisecond); err != nil {
				return err
			}
			ws, err := sampleWindows(e, c, job, fmt.Sprintf("probe-%d", hops), 3, time.Second)
			if err != nil {
				return err
			}
			var r []float64
			for _, w := range ws {
				r = append(r, w.rate())
			}
			maxRate[v.key] = median(r)
			return nil
		})
		if err != nil {
			return fmt.Errorf("capacity %s: %w", v.key, err)
		}
	}

	for _, load := range []string{"idle", "50% loaded"} {
		for _, v := range variants {
			rate := 0.0
			if load != "idle" {
				rate = maxRate[v.key] / 2 / 2 // half the capacity, per source subtask
			}
			dir := filepath.Join(c.Dir(), fmt.Sprintf("probe-%s-%.0f", v.key, rate))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			e.Logf("B4: %s, %s", v.where, load)
			err := runJob(e, c, probeChainSpec("b4-"+v.key, v.partition, dir, rate, v.key == "forward-unchained"), func(job string) error {
				if load != "idle" {
					if err := sleep(e, time.Second); err != nil {
						return err
					}
				}
				if _, _, err := closedLoop(e, c, job, warm); err != nil {
					return err
				}
				for i := 0; i < n; i++ {
					if _, _, err := closedLoop(e, c, job, 1); err != nil {
						return err
					}
					if err := sleep(e, 10*time.Millisecond); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s %s: %w", v.where, load, err)
			}
			probes, err := readProbes(dir)
			if err != nil {
				return err
			}
			samples := perHop(probes, warm)
			if len(samples) == 0 {
				return fmt.Errorf("%s %s: no probe samples", v.where, load)
			}
			p := b.Add(fmt.Sprintf("%s, %s", v.where, load), "µs/hop", false, samples)
			if v.partition == "forward" {
				p.Against("½ channel RTT", halfChan, "µs")
			} else {
				p.Against("½ stream RTT", halfStream, "µs")
			}
			if load != "idle" {
				p.With("source_rate_total_rec_per_s", rate*2)
			}
		}
	}
	for _, load := range []string{"idle", "50% loaded"} {
		if p := b.Point("in-process (forward, chained), " + load); p != nil {
			b.Goal("in-process chained per hop, "+load, p.Median, "<=", 2, "µs")
		}
		if p := b.Point("in-process (forward, unchained), " + load); p != nil {
			b.Goal("in-process unchained per hop, "+load, p.Median, "<=", 10, "µs")
		}
		if p := b.Point("across TaskManagers (rebalance), " + load); p != nil {
			b.Goal("across TaskManagers / ½ stream RTT, "+load, p.Ratio, "<=", 2, "×")
		}
	}
	b.Note("a probe operator notes time.Now() when each barrier reached it (SnapshotState runs just before the barrier is forwarded); per hop = (last − first probe) / %d, per subtask chain; %d checkpoints per point, triggered one at a time; full-speed capacity of the chain: forward chained %.0f rec/s, unchained %.0f rec/s, rebalance %.0f rec/s",
		hops-1, n, maxRate["forward"], maxRate["forward-unchained"], maxRate["rebalance"])
	return nil
}
