// Command weir-faults runs Weir's fault matrix and its soak on the
// docker-compose cluster of deploy/ (with the overlay
// deploy/faults/docker-compose.yml: size-limited file systems for the
// checkpoint storage and the TaskManagers' state) and writes what it saw
// into docs/reliability.md.
//
//	weir-faults -mode matrix   each fault once, on a fresh workload (make faults)
//	weir-faults -mode soak     faults of every kind at random for -duration (make soak)
//
// Every fault is bounded in time and healed: etcd members killed (one, or
// two for a quorum loss) or slowed, partitions made with iptables inside a
// container's network namespace, a tmpfs filled up, processes stopped with
// SIGSTOP or killed. The checkers of internal/check read both jobs'
// committed output and count every lost or duplicated record. It must run
// as root (nsenter, iptables, signals to the containers' processes) with
// the images built (make images) and deploy/pki made (make pki).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "weir-faults:", err)
		os.Exit(1)
	}
}

func run() error {
	mode := flag.String("mode", "matrix", "matrix (each fault once) or soak (random faults for -duration)")
	rows := flag.String("rows", "", "comma-separated rows of the matrix to run (default all): "+rowNames())
	duration := flag.Duration("duration", 30*time.Minute, "soak: how long faults are injected (the jobs' length)")
	seed := flag.Uint64("seed", 0, "soak: seed of the faults' choice and timing (0: from the clock)")
	rate := flag.Int("rate", 300, "records/s of each source subtask")
	report := flag.String("report", "docs/reliability.md", "the report to update")
	project := flag.String("project", "weir-faults", "compose project name")
	keep := flag.Bool("keep", false, "leave the cluster running at the end")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	if os.Geteuid() != 0 {
		return errors.New("must run as root: it enters containers' network namespaces (nsenter, iptables) and signals their processes")
	}
	for _, tool := range []string{"docker", "nsenter", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: %w", tool, err)
		}
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	info := runInfo{date: time.Now(), commit: commit(root), host: fmt.Sprintf("%d cores", runtime.NumCPU())}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c := newCluster(log, root, *project)
	if err := c.up(ctx); err != nil {
		c.down()
		return err
	}
	if !*keep {
		defer c.down()
	}
	reportPath := *report
	if !filepath.IsAbs(reportPath) {
		reportPath = filepath.Join(root, reportPath)
	}

	switch *mode {
	case "matrix":
		selected, err := selectRows(*rows)
		if err != nil {
			return err
		}
		r := newRand(1)
		var results []rowResult
		for _, f := range selected {
			log.Info("row", "fault", f.name, "title", f.title)
			res := runRow(ctx, c, f, r, *rate)
			results = append(results, res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A row that failed may leave the cluster unready: the next
			// row starts from a whole one.
			if err := c.waitReady(ctx, 3*time.Minute); err != nil {
				log.Error("cluster not whole after the row; restarting it", "err", err)
				if err := c.up(ctx); err != nil {
					return err
				}
			}
		}
		if err := writeSection(reportPath, matrixBegin, matrixEnd, renderMatrix(info, results)); err != nil {
			return err
		}
		failed := 0
		for _, r := range results {
			fmt.Printf("%-26s %-5s recovery %-8s restarts %-3d failed checkpoints %-3d %s\n", r.fault.name, verdictCell(r.ok()),
				recovery(orEmpty(r.obs)), orEmpty(r.obs).restarts, orEmpty(r.obs).failed, r.took.Round(time.Second))
			if !r.ok() {
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d rows failed (see %s)", failed, len(results), *report)
		}
	case "soak":
		if *seed == 0 {
			*seed = uint64(time.Now().UnixNano())
		}
		log.Info("soak", "duration", *duration, "seed", *seed)
		res := soak(ctx, c, *duration, *seed, *rate, log)
		if err := writeSection(reportPath, soakBegin, soakEnd, renderSoak(info, res)); err != nil {
			return err
		}
		fmt.Print(renderSoak(info, res))
		if !res.ok() {
			return fmt.Errorf("the soak failed (see %s)", *report)
		}
	default:
		return fmt.Errorf("unknown -mode %q (want matrix or soak)", *mode)
	}
	return nil
}

func orEmpty(o *observation) *observation {
	if o == nil {
		return &observation{}
	}
	return o
}

func rowNames() string {
	var n []string
	for _, f := range faults {
		n = append(n, f.name)
	}
	return strings.Join(n, ", ")
}

func selectRows(list string) ([]fault, error) {
	if list == "" {
		return faults, nil
	}
	var out []fault
	for _, name := range strings.Split(list, ",") {
		f, ok := faultByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("unknown row %q (rows: %s)", name, rowNames())
		}
		out = append(out, f)
	}
	return out, nil
}

// repoRoot is the repository the tool runs in: the compose files and the
// report are found from it.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("run weir-faults inside the repository: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func commit(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
