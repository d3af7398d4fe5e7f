package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirproject/weir/bench/internal/goapijob"
	"github.com/weirproject/weir/bench/internal/harness"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// G1 compares the Go API (package weir) with the built-in operators on
// the same job: source → forward → map → hash → running sum per key →
// forward → discard, every vertex at parallelism 2, 1024 keys, checkpoints
// every second, both measured as B5 (records into the reduce stage ÷ CPU
// time of the JobManager and both TaskManagers). The Go-API job
// (bench/internal/goapijob) runs on TaskManagers that are the program
// itself (`bench-goapi taskmanager …`), its records varint int64s
// encoded and decoded by the API's codecs and its operators the API's
// wrappers (emitter, Map, Reduce over a ValueState). The built-in job is
// sequence-source → bench-map → keyed-sum → discard-sink on
// bench-taskmanager, its records decimal strings.

// g1BuiltinSpec is the built-in job: the Go-API job's shape, vertex names,
// parallelism, partitioners and checkpoint settings.
func g1BuiltinSpec() string {
	return fmt.Sprintf(`name: g1-builtin
checkpointing: {interval: 1s, mode: exactly-once, retained: 1}
vertices:
  - {name: %[1]s, operator: sequence-source, parallelism: %[5]d, config: {count: 0, keys: %[6]d, rate: 0}}
  - {name: %[2]s, operator: bench-map, parallelism: %[5]d, inputs: [{from: %[1]s, partition: forward}]}
  - {name: %[3]s, operator: keyed-sum, parallelism: %[5]d, inputs: [{from: %[2]s, partition: hash}]}
  - {name: %[4]s, operator: discard-sink, parallelism: %[5]d, inputs: [{from: %[3]s, partition: forward}]}
`, goapijob.Source, goapijob.Map, goapijob.Sum, goapijob.Sink, goapijob.Parallelism, goapijob.Keys)
}

// g1TaskManager writes, into dir, the executable the Go-API cluster's
// TaskManagers are started as: a shell script that execs `bench-goapi
// taskmanager` with the flags the harness gives every TaskManager. exec
// keeps the process ID, so /proc CPU time and signals reach the program.
// Each gets a local state directory of its own under dir: the built-in
// cluster, up at the same time, has TaskManagers of the same IDs, whose
// default directories (<temp dir>/weir-<id>) are cleared at start.
func g1TaskManager(dir, prog string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bench-goapi-taskmanager")
	script := fmt.Sprintf("#!/bin/sh\nexec '%s' taskmanager --state-dir '%s'/state-$$ \"$@\"\n", prog, dir)
	return path, os.WriteFile(path, []byte(script), 0o755)
}

// runGraphJob is runJob for a job graph built in Go rather than a YAML
// spec.
func runGraphJob(e *Env, c *harness.Cluster, g *weirv1.JobGraph, measure func(job string) error) error {
	r, err := c.Client.SubmitJob(e.Ctx, &weirv1.SubmitJobRequest{Job: g})
	if err != nil {
		return err
	}
	job := r.GetJobId()
	if err := c.WaitRunning(e.Ctx, job, 30*time.Second); err != nil {
		return err
	}
	merr := measure(job)
	j, err := c.Job(e.Ctx, job)
	if err == nil && j.GetState() != weirv1.JobState_JOB_STATE_RUNNING {
		e.Problem("job %s is %s after the measurement: %s", j.GetName(), j.GetState(), j.GetFailureCause())
	}
	if err := c.Cancel(e.Ctx, job); err != nil && merr == nil {
		return fmt.Errorf("cancel: %w", err)
	}
	return merr
}

// G1: the typed Go API's cost per core against the built-in operators.
func runG1(e *Env, b *Bench) error {
	prog := filepath.Join(filepath.Dir(e.Bin.TaskManager), "bench-goapi")
	if _, err := os.Stat(prog); err != nil {
		return fmt.Errorf("%w (build it: make bench, or go build -o bin/ ./bench/cmd/bench-goapi)", err)
	}
	graph, err := goapijob.Job().Graph()
	if err != nil {
		return err
	}
	tm, err := g1TaskManager(filepath.Join(e.Work, "g1-goapi"), prog)
	if err != nil {
		return err
	}
	// Two clusters, both up for the whole benchmark so rounds interleave
	// without restarts; the idle one is not in the CPU measured (only the
	// running cluster's processes are).
	builtin, err := e.Cluster("g1-builtin", harness.Config{TaskManagers: 2, Slots: 2})
	if err != nil {
		return err
	}
	defer e.StopCluster(builtin)
	gbin := e.Bin
	gbin.TaskManager = tm
	e.Logf("starting cluster g1-goapi (2 TaskManagers × 2 slots, %s taskmanager)", prog)
	goapi, err := harness.StartCluster(e.Ctx, harness.Config{
		Dir: filepath.Join(e.Work, "g1-goapi"), Bin: gbin, TaskManagers: 2, Slots: 2, Pprof: e.Profile,
	})
	if err != nil {
		return fmt.Errorf("Go-API cluster: %w", err)
	}
	defer e.StopCluster(goapi)

	// 3 rounds × 2 jobs of ~5 s: about 40 s with the clusters' start.
	rounds, windows, warm := 3, 3, 2*time.Second
	if e.Quick {
		rounds, windows, warm = 1, 2, time.Second
	}
	type variant struct {
		key, label string
		c          *harness.Cluster
		run        func(measure func(job string) error) error
	}
	variants := []variant{
		{"builtin", "built-in: sequence-source → map → hash → keyed-sum → sink (bench-taskmanager, decimal records)", builtin,
			func(m func(string) error) error { return runJob(e, builtin, g1BuiltinSpec(), m) }},
		{"goapi", "Go API: Generate → Map → KeyBy → Reduce → Discard (bench-goapi taskmanager, varint int64)", goapi,
			func(m func(string) error) error { return runGraphJob(e, goapi, graph, m) }},
	}
	type acc struct {
		perCore, rate, cores, msgs, exBytes []float64
		rounds                              []float64 // median per core of each round
		failed                              float64
	}
	res := map[string]*acc{}
	for r := 0; r < rounds; r++ {
		// Alternate which goes first, so drift of the machine over a
		// round hits both alike.
		order := []variant{variants[0], variants[1]}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, v := range order {
			e.Logf("G1 round %d: %s", r+1, v.key)
			err := v.run(func(job string) error {
				if err := sleep(e, warm); err != nil {
					return err
				}
				ws, err := sampleWindows(e, v.c, job, goapijob.Sum, windows, time.Second)
				if err != nil {
					return err
				}
				a := res[v.key]
				if a == nil {
					a = &acc{}
					res[v.key] = a
				}
				var round []float64
				for _, w := range ws {
					pc := w.Records / w.CPU.Seconds()
					round = append(round, pc)
					a.perCore = append(a.perCore, pc)
					a.rate = append(a.rate, w.rate())
					a.cores = append(a.cores, w.CPU.Seconds()/w.Elapsed.Seconds())
					a.failed += w.Failed
					if x := w.Exchange; x.Records > 0 {
						a.msgs = append(a.msgs, x.Messages/x.Records)
						a.exBytes = append(a.exBytes, x.Bytes/x.Records)
					}
				}
				a.rounds = append(a.rounds, median(round))
				if r == rounds-1 {
					profileTMs(e, b, v.c, v.key, 5*time.Second)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: %w", v.key, err)
			}
		}
	}
	bi, ga := res["builtin"], res["goapi"]
	bp := b.Add(variants[0].label, "rec/s/core", true, bi.perCore)
	gp := b.Add(variants[1].label, "rec/s/core", true, ga.perCore)
	gp.Against("built-in", bp.Median, "rec/s/core")
	for _, x := range []struct {
		p *Point
		a *acc
	}{{bp, bi}, {gp, ga}} {
		x.p.With("records_per_s", median(x.a.rate))
		x.p.With("cpu_cores_used", median(x.a.cores))
		x.p.With("exchange_messages_per_remote_record", median(x.a.msgs))
		x.p.With("exchange_bytes_per_remote_record", median(x.a.exBytes))
	}
	var ratios []float64
	for i := range min(len(ga.rounds), len(bi.rounds)) {
		ratios = append(ratios, ga.rounds[i]/bi.rounds[i])
	}
	b.Add("  Go API ÷ built-in, per core, round by round", "×", true, ratios)
	for _, v := range variants {
		a := res[v.key]
		b.Add("  wire, "+v.key+": exchange bytes (protobuf) per record sent across TaskManagers", "B", false, a.exBytes)
		if a.failed > 0 {
			e.Problem("%s: %.0f checkpoints failed while measuring", v.key, a.failed)
		}
	}
	b.Goal("Go API ÷ built-in records/s/core (typed API costs ≤ 15 %)", gp.Ratio, ">=", 0.85, "")
	b.Note("per core = records into the reduce stage (vertex %q: keyed-sum or the Go API's Reduce) ÷ CPU time of the JobManager and both TaskManagers of the job's cluster in the same 1 s window (%d windows × %d interleaved rounds, after %s of warm-up), as B5; both jobs: p=2 everywhere, %d keys, forward source → map, hash map → sum, checkpoints every 1 s; the ratio is the medians' (the round-by-round ratios are of each round's medians)", goapijob.Sum, windows, rounds, warm, goapijob.Keys)
	return nil
}
