package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/sql/collect"
	"github.com/weirproject/weir/internal/sql/compile"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

const envCollectAddress = "WEIR_COLLECT_ADDRESS"

// placeholderCollectAddress stands for the listener's address where there
// is none yet: in EXPLAIN's plans, and in the first compilation, which
// finds the script's errors (and whether it has a SELECT) before weir
// listens or connects to anything.
const placeholderCollectAddress = "weir-sql-client:0"

// jobPollInterval is how often a SELECT's job is asked for its state
// while its rows stream.
const jobPollInterval = 500 * time.Millisecond

// sqlFlags are what `weir sql` and `weir sql explain` share.
type sqlFlags struct {
	file, inline string
	parallelism  int
	interval     time.Duration
	state        string
	from         []string
}

func (f *sqlFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "SQL script file (- for stdin)")
	cmd.Flags().StringVarP(&f.inline, "execute", "e", "", "SQL script text, instead of -f")
	cmd.Flags().IntVarP(&f.parallelism, "parallelism", "p", 1, "parallelism of the jobs' vertices")
	cmd.Flags().DurationVar(&f.interval, "checkpoint-interval", 10*time.Second, "how often the jobs checkpoint (exactly once; their sinks commit then)")
	cmd.Flags().StringVar(&f.state, "state", "heap", "state backend of the jobs: heap, pebble (incremental checkpoints)")
	cmd.Flags().StringArrayVar(&f.from, "from", nil, "start a sink's job from a savepoint or retained checkpoint: SINK=PATH, or PATH when the script has one job (repeatable)")
}

// restoreFrom sets the savepoint each job named by --from starts from.
func (f *sqlFlags) restoreFrom(res *compile.Result) error {
	for _, spec := range f.from {
		name, path, named := strings.Cut(spec, "=")
		if !named {
			path = spec
			if len(res.Jobs) != 1 {
				return usageErrorf("--from %s: the script has %d jobs: name one, --from SINK=PATH", spec, len(res.Jobs))
			}
			name = res.Jobs[0].Name
		}
		found := false
		for _, j := range res.Jobs {
			if j.Name == name {
				j.Graph.RestoreFrom, found = path, true
			}
		}
		if !found {
			var names []string
			for _, j := range res.Jobs {
				names = append(names, j.Name)
			}
			return usageErrorf("--from %s: the script has no job %q (it has %s)", spec, name, strings.Join(names, ", "))
		}
	}
	return nil
}

// script reads the script and names it for error messages.
func (a *app) script(f *sqlFlags) (name, text string, err error) {
	switch {
	case f.file != "" && f.inline != "":
		return "", "", usageErrorf("give the script with -f or with -e, not both")
	case f.inline != "":
		return "<command-line>", f.inline, nil
	case f.file == "-":
		data, err := io.ReadAll(a.stdin)
		if err != nil {
			return "", "", fmt.Errorf("read SQL script from stdin: %w", err)
		}
		return "<stdin>", string(data), nil
	case f.file != "":
		data, err := os.ReadFile(f.file)
		if err != nil {
			return "", "", fmt.Errorf("read SQL script: %w", err)
		}
		return f.file, string(data), nil
	}
	return "", "", usageErrorf("give the script with -f FILE (- for stdin) or -e SQL")
}

// scriptError is a problem in the script, printed as compilers do,
// FILE:LINE:COL: message, without weir's prefix.
type scriptError struct {
	msg string
	err error
}

func (e *scriptError) Error() string { return e.msg }
func (e *scriptError) Unwrap() error { return e.err }

func compileScript(name, text string, f *sqlFlags, collectAddress string) (*compile.Result, error) {
	if f.parallelism < 1 {
		return nil, usageErrorf("--parallelism must be at least 1, got %d", f.parallelism)
	}
	if f.interval <= 0 {
		return nil, usageErrorf("--checkpoint-interval must be positive, got %s", f.interval)
	}
	res, err := compile.Script(text, compile.Options{Parallelism: f.parallelism, CollectAddress: collectAddress,
		CheckpointInterval: f.interval, StateBackend: f.state})
	if ce, ok := errors.AsType[*compile.Error](err); ok {
		return nil, &scriptError{msg: fmt.Sprintf("%s:%d:%d: %s", name, ce.Line, ce.Col, ce.Msg), err: err}
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return res, f.restoreFrom(res)
}

func (a *app) sqlCommand() *cobra.Command {
	var f sqlFlags
	var collectAddress, output string
	cmd := &cobra.Command{
		Use:   "sql (-f FILE | -e SQL)",
		Short: "Run a SQL script: a job per sink, a SELECT's rows to the terminal",
		Long: `weir sql compiles a SQL script and runs it: every statement is compiled
first, and nothing is submitted when one has an error, printed as
FILE:LINE:COL: message. Then each sink's job (CREATE SINK, INSERT INTO) is
submitted, printing "<sink name>: <job ID>", and each SELECT with no sink
runs in turn: its job streams the rows to this command, which prints them
as they come until the SELECT's LIMIT is reached or its input ends, then
cancels the job (Ctrl-C too). An EXPLAIN statement prints its plans.

The TaskManagers send the rows to --collect-address, where this command
listens: by default this host's address toward the JobManager, on a free
port; $` + envCollectAddress + ` replaces the default. Delivery is best
effort: a job that restarts sends the rows since its last checkpoint again,
and rows on their way when it failed may be lost.`,
		Args: noSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseResultFormat(output)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("collect-address") {
				if v, ok := a.lookupEnv(envCollectAddress); ok {
					collectAddress = v
				}
			}
			return a.runSQL(cmd.Context(), &f, collectAddress, format)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&collectAddress, "collect-address", "",
		"host:port to receive a SELECT's rows on, reachable from the TaskManagers (default: this host's address toward the JobManager, a free port; $"+envCollectAddress+")")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "how a SELECT's rows print: table or csv")
	cmd.AddCommand(a.sqlExplainCommand())
	return cmd
}

// noSubcommand refuses arguments: the word is a mistyped subcommand.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

func (a *app) sqlExplainCommand() *cobra.Command {
	var f sqlFlags
	cmd := &cobra.Command{
		Use:   "explain (-f FILE | -e SQL)",
		Short: "Print each job's logical plan, physical plan and job graph",
		Long: `Explain compiles a SQL script and prints, for each job it would submit,
its statement, its logical plan, its physical plan (the vertices and what
each runs) and its job graph as a YAML job spec. Nothing is submitted.`,
		Args: exactArgs(),
		RunE: func(_ *cobra.Command, _ []string) error {
			name, text, err := a.script(&f)
			if err != nil {
				return err
			}
			res, err := compileScript(name, text, &f, placeholderCollectAddress)
			if err != nil {
				return err
			}
			for i, j := range res.Jobs {
				if i > 0 {
					if _, err := fmt.Fprintln(a.stdout); err != nil {
						return err
					}
				}
				if err := writeExplain(a.stdout, j); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func writeExplain(w io.Writer, j compile.Job) error {
	section := func(s string) string { return strings.TrimRight(s, "\n") + "\n" }
	_, err := fmt.Fprintf(w, "== %s ==\n%s\n-- Logical plan\n%s\n-- Physical plan\n%s\n-- Job graph\n%s",
		j.Name, section(j.Statement), section(j.Explain.Logical), section(j.Explain.Physical), section(j.Explain.Graph))
	return err
}

func (a *app) runSQL(ctx context.Context, f *sqlFlags, collectAddress string, format resultFormat) error {
	name, text, err := a.script(f)
	if err != nil {
		return err
	}
	res, err := compileScript(name, text, f, cmp.Or(collectAddress, placeholderCollectAddress))
	if err != nil {
		return err
	}
	var recv *collect.Receiver
	if slices.ContainsFunc(res.Jobs, streams) {
		if _, err := a.client(); err != nil {
			return err
		}
		// The JobManager's address is known now, found through etcd or not.
		if recv, err = collect.Listen(collectAddress, a.addr); err != nil {
			return err
		}
		defer recv.Close()
		if res, err = compileScript(name, text, f, recv.Address()); err != nil {
			return err
		}
	}

	// The sinks' jobs first, in order: they run on their own, where a
	// SELECT holds the command until it ends.
	var selects []compile.Job
	for _, j := range res.Jobs {
		switch {
		case j.ExplainOnly:
			if err := writeExplain(a.stdout, j); err != nil {
				return err
			}
		case j.Select != nil:
			selects = append(selects, j)
		default:
			id, err := a.submitSQL(ctx, j)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(a.stdout, "%s: %s\n", j.Name, id); err != nil {
				return err
			}
		}
	}
	for i, j := range selects {
		if i > 0 {
			// A blank line between two results.
			if _, err := fmt.Fprintln(a.stdout); err != nil {
				return err
			}
		}
		if err := a.runSelect(ctx, recv, j, format); err != nil {
			return err
		}
	}
	return nil
}

// streams says whether j's rows stream to this command: a SELECT with no
// sink that is run, and not one with LIMIT 0, which has none.
func streams(j compile.Job) bool {
	return j.Select != nil && !j.ExplainOnly && j.Select.Limit != 0
}

func (a *app) submitSQL(ctx context.Context, j compile.Job) (string, error) {
	c, err := a.client()
	if err != nil {
		return "", err
	}
	resp, err := call(ctx, a, c.SubmitJob, &weirv1.SubmitJobRequest{Job: j.Graph}, fmt.Sprintf("submit job %q", j.Name), "")
	if err != nil {
		return "", err
	}
	return resp.GetJobId(), nil
}

// runSelect runs a SELECT's job and prints its rows until it has the
// LIMIT's, the job ends, or the user interrupts; then the job is
// cancelled.
func (a *app) runSelect(ctx context.Context, recv *collect.Receiver, j compile.Job, format resultFormat) error {
	out := newResultWriter(a.stdout, format, j.Select.Schema)
	if j.Select.Limit == 0 {
		// Nothing to wait for: no job runs.
		if err := out.header(); err != nil {
			return err
		}
		return out.footer(0)
	}
	id, err := a.submitSQL(ctx, j)
	if err != nil {
		return err
	}
	// On stderr: stdout holds the rows alone, to be piped.
	fmt.Fprintf(a.stderr, "%s: %s\n", j.Name, id)
	q := recv.Receive(id)
	defer q.Done()
	if err := out.header(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A second interrupt, while the job is being cancelled, ends weir.
	context.AfterFunc(ctx, stop)
	n, err := a.streamRows(ctx, id, q, out, j.Select.Limit)
	if err != nil {
		return err
	}
	return out.footer(n)
}

// streamRows prints the rows of job id as they come and watches the job.
func (a *app) streamRows(ctx context.Context, id string, q *collect.Query, out *resultWriter, limit int64) (int64, error) {
	c, err := a.client()
	if err != nil {
		return 0, err
	}
	tick := time.NewTicker(jobPollInterval)
	defer tick.Stop()
	var n int64
	var restarts int32
	for {
		select {
		case b := <-q.Batches():
			for _, r := range b.Rows {
				if limit >= 0 && n >= limit {
					break
				}
				if err := out.row(r); err != nil {
					a.cancelJob(c, id)
					return n, err
				}
				n++
			}
			if err := out.flush(); err != nil {
				a.cancelJob(c, id)
				return n, err
			}
			if limit >= 0 && n >= limit {
				q.Done()
				a.cancelJob(c, id)
				return n, nil
			}
		case <-tick.C:
			resp, err := call(ctx, a, c.GetJob, &weirv1.GetJobRequest{JobId: id}, "get job "+id, jobNotFound(id))
			if err != nil {
				a.cancelJob(c, id)
				return n, err
			}
			job := resp.GetJob()
			switch job.GetState() {
			case weirv1.JobState_JOB_STATE_FINISHED:
				// Its subtasks finished once this command had their rows.
				return n, nil
			case weirv1.JobState_JOB_STATE_FAILED:
				return n, fmt.Errorf("job %s failed: %s", id, oneLine(job.GetFailureCause()))
			case weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_CANCELLING:
				return n, fmt.Errorf("job %s was cancelled", id)
			}
			if job.GetRestarts() > restarts {
				restarts = job.GetRestarts()
				cause := oneLine(job.GetFailureCause())
				if ex := job.GetExceptions(); len(ex) > 0 {
					cause = oneLine(ex[len(ex)-1].GetCause())
				}
				if strings.Contains(cause, collect.Operator+":") {
					// The rows cannot reach this command: restarts will
					// not change that.
					a.cancelJob(c, id)
					return n, fmt.Errorf("job %s cannot send its rows here (%s); job cancelled", id, cause)
				}
				fmt.Fprintf(a.stderr, "weir: job %s restarted (%s): rows since its last checkpoint may print again\n", id, cause)
			}
		case <-ctx.Done():
			a.cancelJob(c, id)
			return n, fmt.Errorf("interrupted; job %s cancelled", id)
		}
	}
}

// cancelJob cancels a SELECT's job and waits, up to --timeout, for it to
// end, so that it does not run on after this command. It reports
// failures on stderr only: the command's outcome is the rows it printed.
func (a *app) cancelJob(c weirv1grpc.ClientServiceClient, id string) {
	// Not the command's context: an interrupt is what asked for this.
	ctx := context.Background()
	if _, err := call(ctx, a, c.CancelJob, &weirv1.CancelJobRequest{JobId: id}, "cancel job "+id, jobNotFound(id)); err != nil {
		fmt.Fprintf(a.stderr, "weir: %v\n", err)
		return
	}
	deadline := time.Now().Add(a.timeout)
	for time.Now().Before(deadline) {
		resp, err := call(ctx, a, c.GetJob, &weirv1.GetJobRequest{JobId: id}, "get job "+id, jobNotFound(id))
		if err != nil {
			fmt.Fprintf(a.stderr, "weir: %v\n", err)
			return
		}
		switch resp.GetJob().GetState() {
		case weirv1.JobState_JOB_STATE_CANCELED, weirv1.JobState_JOB_STATE_FINISHED, weirv1.JobState_JOB_STATE_FAILED:
			return
		}
		time.Sleep(jobPollInterval / 5)
	}
	fmt.Fprintf(a.stderr, "weir: job %s is still being cancelled after %s\n", id, a.timeout)
}
