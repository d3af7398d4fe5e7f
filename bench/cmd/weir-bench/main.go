// Command weir-bench runs Weir's benchmark suite: it measures
// this machine's floors, then each benchmark on real daemons (separate
// processes on loopback), prints one table and writes it as JSON.
//
//	weir-bench [-only B1,B2] [-quick] [-profile] [-bin bin] [-out bench/results/latest.json]
//
// `make bench` builds everything and runs it; `make bench BENCH=B2` runs one.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weirproject/weir/bench/internal/floors"
	"github.com/weirproject/weir/bench/internal/harness"
	"github.com/weirproject/weir/bench/internal/suite"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve-floor":
			fs := flag.NewFlagSet("serve-floor", flag.ExitOnError)
			addr := fs.String("addr", "127.0.0.1:0", "listen address")
			_ = fs.Parse(os.Args[2:])
			go exitOnSignal()
			exit(floors.Serve(*addr))
		case "serve-etcd":
			fs := flag.NewFlagSet("serve-etcd", flag.ExitOnError)
			dir := fs.String("dir", "", "data directory")
			addr := fs.String("addr", "127.0.0.1:2379", "client address (also serves /metrics)")
			_ = fs.Parse(os.Args[2:])
			// Exit on SIGTERM at once: etcd's own Close is slow and not measured.
			go exitOnSignal()
			exit(floors.ServeEtcd(*dir, *addr))
		}
	}
	exit(run())
}

// exitOnSignal ends a helper process cleanly on SIGTERM or SIGINT.
func exitOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	<-ch
	os.Exit(0)
}

func exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "weir-bench:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func run() error {
	only := flag.String("only", "", "comma-separated benchmark IDs or names to run (the floors always run): "+names())
	quick := flag.Bool("quick", false, "fewer repetitions and shorter windows (a smoke run; numbers are noisier)")
	profile := flag.Bool("profile", false, "serve pprof from the TaskManagers and save CPU profiles of extra (unmeasured) windows")
	bin := flag.String("bin", "bin", "directory holding jobmanager, bench-taskmanager, bench-goapi and nexmark")
	out := flag.String("out", "bench/results/latest.json", "JSON report path ('' for none)")
	work := flag.String("work", "", "work directory for logs, checkpoints and state (default: a new one under $TMPDIR, removed after a clean run)")
	keep := flag.Bool("keep", false, "keep the work directory")
	timeout := flag.Duration("timeout", 30*time.Minute, "give up (and stop every process) after this long (when -only selects N1 and -timeout is not given: 90m, for its 16 jobs of 10 M events)")
	quietWait := flag.Duration("quiet-wait", 60*time.Second, "before benchmarks, wait for other processes to calm down, up to this long in the whole run (0: never wait)")
	quietCores := flag.Float64("quiet-cores", 0.3, "CPU cores other processes may use for the host to count as quiet")
	stateBytes := flag.Int64("state-bytes", 0, "keyed state S1, S3, R1 and RS load, in bytes (default 1 GiB; with -quick 64 MiB for S1, 128 MiB for S3, R1 and RS)")
	nexmarkEvents := flag.Int64("nexmark-events", 0, "events each of N1's and N2's Nexmark jobs generates (default 3,000,000; with -quick N1 1,000,000, N2 500,000)")
	nexmarkSamples := flag.Int("nexmark-samples", 0, "runs of each point N1 and N2 take the median of (default 3; with -quick 1)")
	nexmarkQueries := flag.String("nexmark-queries", "", "comma-separated queries N1 and N2 run (default: all of each)")
	flag.Parse()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	bins := harness.Binaries{
		JobManager:       filepath.Join(*bin, "jobmanager"),
		TaskManager:      filepath.Join(*bin, "bench-taskmanager"),
		StockTaskManager: filepath.Join(*bin, "taskmanager"),
		ProfJobManager:   filepath.Join(*bin, "bench-jobmanager"),
	}
	need := []string{bins.JobManager, bins.TaskManager, bins.StockTaskManager}
	if *profile {
		need = append(need, bins.ProfJobManager)
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (run make bench, or make build and go build -o bin/ ./bench/cmd/...)", err)
		}
	}
	if bins.JobManager, err = filepath.Abs(bins.JobManager); err != nil {
		return err
	}
	if bins.TaskManager, err = filepath.Abs(bins.TaskManager); err != nil {
		return err
	}
	if bins.StockTaskManager, err = filepath.Abs(bins.StockTaskManager); err != nil {
		return err
	}
	if bins.ProfJobManager, err = filepath.Abs(bins.ProfJobManager); err != nil {
		return err
	}
	if *work == "" {
		if *work, err = os.MkdirTemp("", "weir-bench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(*work, 0o755); err != nil {
		return err
	}
	results := filepath.Dir(*out)
	if *out == "" {
		results = *work
	}

	var sel []string
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sel = append(sel, s)
		}
	}
	timeoutSet := false
	flag.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	for _, s := range sel {
		if !timeoutSet && (strings.EqualFold(s, "N1") || strings.EqualFold(s, "nexmark")) {
			*timeout = 90 * time.Minute
		}
		if !timeoutSet && (strings.EqualFold(s, "N2") || strings.EqualFold(s, "nexmark-sql")) {
			*timeout = max(*timeout, 60*time.Minute)
		}
	}
	var queries []string
	for _, q := range strings.Split(*nexmarkQueries, ",") {
		if q = strings.TrimSpace(q); q != "" {
			queries = append(queries, q)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r := &suite.Report{
		SchemaVersion: suite.SchemaVersion,
		StartedAt:     time.Now().UTC(),
		Machine:       suite.MachineInfo(*work),
		Git:           gitInfo(),
		Options:       suite.Options{Only: sel, Quick: *quick, Profile: *profile, WorkDir: *work},
	}
	e := &suite.Env{Ctx: ctx, Bin: bins, Self: self, Work: *work, Results: results, Quick: *quick, Profile: *profile,
		QuietWait: *quietWait, QuietCores: *quietCores, StateBytes: *stateBytes, NexmarkEvents: *nexmarkEvents,
		NexmarkSamples: *nexmarkSamples, NexmarkQueries: queries}
	func() {
		defer harness.KillAll()
		defer e.Close()
		suite.Run(e, r, sel)
	}()
	r.FinishedAt = time.Now().UTC()
	r.DurationS = r.FinishedAt.Sub(r.StartedAt).Seconds()

	fmt.Println()
	fmt.Printf("Weir benchmarks — %s, %d CPUs (%s), %s, %s, commit %s%s, %.0fs\n\n",
		r.StartedAt.Format("2006-01-02 15:04 UTC"), r.Machine.CPUs, r.Machine.CPUModel, r.Machine.Kernel, r.Machine.GoVersion,
		short(r.Git.Commit), map[bool]string{true: " (dirty)"}[r.Git.Dirty], r.DurationS)
	r.WriteTable(os.Stdout)

	if *out != "" {
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return err
		}
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("\nwrote %s\n", *out)
	}
	failed := 0
	for _, b := range r.Benchmarks {
		if b.Status != "ok" {
			failed++
		}
	}
	if failed == 0 && len(r.Problems) == 0 && !*keep {
		os.RemoveAll(*work)
	} else {
		fmt.Printf("logs kept in %s\n", *work)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted")
	}
	if failed > 0 {
		return fmt.Errorf("%d benchmark(s) failed to run", failed)
	}
	return nil
}

func names() string {
	var s []string
	for _, b := range suite.All {
		s = append(s, b.ID+"|"+b.Name)
	}
	return strings.Join(s, ", ")
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func gitInfo() suite.Git {
	var g suite.Git
	if b, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		g.Commit = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		g.Dirty = len(strings.TrimSpace(string(b))) > 0
	}
	return g
}
