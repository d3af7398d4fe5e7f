package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// group makes a command that only holds subcommands; without a RunE cobra
// would answer a mistyped subcommand with help and exit status 0.
func group(use, short string, aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Aliases: aliases,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
}

func (a *app) jobCommand() *cobra.Command {
	cmd := group("job", "Submit, inspect, cancel and stop jobs")
	cmd.AddCommand(a.jobSubmitCommand(), a.jobListCommand(), a.jobGetCommand(), a.jobCancelCommand(), a.jobStopCommand(), a.jobRescaleCommand(), a.jobExceptionsCommand(), a.jobAutoscalerCommand())
	return cmd
}

func (a *app) jobSubmitCommand() *cobra.Command {
	var file, fromSavepoint string
	cmd := &cobra.Command{
		Use:   "submit -f FILE",
		Short: "Submit a job spec and print the new job's ID",
		Long: `Submit parses and validates a YAML job spec locally, submits it to the
JobManager and prints the job ID alone on stdout, so scripts can capture it:

  id=$(weir job submit -f examples/running-sum.yaml)

Use -f - to read the spec from stdin.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := a.readSpec(file)
			if err != nil {
				return err
			}
			if fromSavepoint != "" {
				g.RestoreFrom = fromSavepoint
			}
			if err := jobgraph.Validate(g); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := call(cmd.Context(), a, c.SubmitJob, &weirv1.SubmitJobRequest{Job: g},
				fmt.Sprintf("submit job %q", g.Name), "")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, resp.GetJobId())
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "job spec YAML file (- for stdin)")
	cmd.Flags().StringVar(&fromSavepoint, "from", "", "start from this savepoint or retained checkpoint (its directory or _metadata; overrides the spec's restore-from)")
	// Flink's CLI spells it --fromSavepoint/-s; keep an alias for its users.
	cmd.Flags().StringVarP(&fromSavepoint, "from-savepoint", "s", "", "alias of --from")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func (a *app) readSpec(file string) (*weirv1.JobGraph, error) {
	if file != "-" {
		return jobgraph.ParseSpecFile(file)
	}
	data, err := io.ReadAll(a.stdin)
	if err != nil {
		return nil, fmt.Errorf("read job spec from stdin: %w", err)
	}
	return jobgraph.ParseSpec(data)
}

func (a *app) jobListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the jobs the JobManager knows",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseFormat(output)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := call(cmd.Context(), a, c.ListJobs, &weirv1.ListJobsRequest{}, "list jobs", "")
			if err != nil {
				return err
			}
			if format == formatJSON {
				views := make([]jobView, 0, len(resp.GetJobs()))
				for _, j := range resp.GetJobs() {
					views = append(views, newJobView(j))
				}
				return writeJSON(a.stdout, views)
			}
			return writeJobTable(a.stdout, resp.GetJobs())
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (a *app) jobGetCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get JOB_ID",
		Short: "Show a job, its vertices and subtasks",
		Args:  exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, job, err := a.getJob(cmd, output, args[0])
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(a.stdout, newJobView(job))
			}
			return writeJobDetails(a.stdout, job)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (a *app) jobCancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB_ID",
		Short: "Cancel a job without a savepoint",
		Args:  exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			if _, err := call(cmd.Context(), a, c.CancelJob, &weirv1.CancelJobRequest{JobId: id}, "cancel job "+id, jobNotFound(id)); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "Cancellation of job %s requested.\n", id)
			return err
		},
	}
}

func (a *app) jobStopCommand() *cobra.Command {
	var dir string
	var drain bool
	cmd := &cobra.Command{
		Use:   "stop JOB_ID --savepoint-dir DIR [--drain]",
		Short: "Stop a job with a final savepoint",
		Long: `Stop takes a savepoint and then stops the job, printing the savepoint's
checkpoint ID and path. With --drain the sources end their input first (the
job finishes) instead of being suspended; resume from the savepoint with
weir job submit --from.

The command waits up to --timeout for the savepoint.`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			resp, err := call(cmd.Context(), a, c.StopWithSavepoint,
				&weirv1.StopWithSavepointRequest{JobId: id, TargetDirectory: dir, Drain: drain}, "stop job "+id, jobNotFound(id))
			if err != nil {
				return err
			}
			return writeTriggered(a.stdout, resp.GetCheckpointId(), resp.GetExternalPath())
		},
	}
	cmd.Flags().StringVar(&dir, "savepoint-dir", "", "directory to write the savepoint to")
	cmd.Flags().BoolVar(&drain, "drain", false, "end the sources' input before stopping, so event-time windows fire")
	_ = cmd.MarkFlagRequired("savepoint-dir")
	return cmd
}

func (a *app) taskManagerCommand() *cobra.Command {
	cmd := group("taskmanager", "Inspect the cluster's TaskManagers", "tm")
	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the registered TaskManagers and their slots",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseFormat(output)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := call(cmd.Context(), a, c.ListTaskManagers, &weirv1.ListTaskManagersRequest{}, "list taskmanagers", "")
			if err != nil {
				return err
			}
			if format == formatJSON {
				views := make([]taskManagerView, 0, len(resp.GetTaskmanagers()))
				for _, tm := range resp.GetTaskmanagers() {
					views = append(views, newTaskManagerView(tm))
				}
				return writeJSON(a.stdout, views)
			}
			return writeTaskManagerTable(a.stdout, resp.GetTaskmanagers())
		},
	}
	addOutputFlag(list, &output)
	cmd.AddCommand(list)
	return cmd
}

func jobNotFound(id string) string { return fmt.Sprintf("job %s not found", id) }

func (a *app) jobRescaleCommand() *cobra.Command {
	var parallelism map[string]int
	cmd := &cobra.Command{
		Use:   "rescale JOB_ID --parallelism VERTEX=N [--parallelism VERTEX=N ...]",
		Short: "Restart a running job at new vertex parallelisms",
		Long: `Rescale takes a checkpoint of a running job and restarts it from there with
the vertices given at their new parallelism (the others keep theirs), in one
step: keyed state is split along its key groups and list state
redistributed, as a restore from a savepoint at another parallelism does.
The job is stored with its new parallelism, so a new leader keeps it. The
command prints the checkpoint's ID and returns once the restart began;
weir job get shows the new subtasks.`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(parallelism) == 0 {
				return usageErrorf("--parallelism VERTEX=N is required")
			}
			req := &weirv1.RescaleJobRequest{JobId: args[0], Parallelism: map[string]int32{}}
			for v, n := range parallelism {
				if n < 1 {
					return usageErrorf("--parallelism %s=%d: parallelism must be at least 1", v, n)
				}
				req.Parallelism[v] = int32(n)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := call(cmd.Context(), a, c.RescaleJob, req, "rescale job "+args[0], jobNotFound(args[0]))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "Job %s rescaling from checkpoint %d.\n", args[0], resp.GetCheckpointId())
			return err
		},
	}
	cmd.Flags().StringToIntVar(&parallelism, "parallelism", nil, "new parallelism of a vertex, as VERTEX=N (repeat for more vertices)")
	return cmd
}

func (a *app) jobExceptionsCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "exceptions JOB_ID",
		Short: "Show a job's failures, newest first, and what each restarted",
		Long: `Exceptions lists the failures in a job's history, newest first (the
latest 32): when, which subtask and TaskManager, the cause, and which
pipelined regions it restarted ("all" for the whole job, "-" when the job
was not restarted).`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, job, err := a.getJob(cmd, output, args[0])
			if err != nil {
				return err
			}
			views := newExceptionViews(job)
			if format == formatJSON {
				return writeJSON(a.stdout, views)
			}
			return writeExceptions(a.stdout, views)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (a *app) jobAutoscalerCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "autoscaler JOB_ID",
		Short: "Show a job's autoscaler: its configuration and every decision with its reason",
		Long: `Autoscaler prints the autoscaler's decisions, oldest first: each
rescale it made and why, and each time it decided not to (a run of the same
decision to do nothing is one line, with how often it was made). -o json
adds the configuration and every vertex's figures (true processing rate,
target and catch-up rates, utilization, backlog) behind each decision.`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(output)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			resp, err := call(cmd.Context(), a, c.GetAutoscaler, &weirv1.GetAutoscalerRequest{JobId: id}, "get the autoscaler of job "+id, jobNotFound(id))
			if err != nil {
				return err
			}
			if f == formatJSON {
				return writeJSON(a.stdout, newAutoscalerView(resp))
			}
			return writeAutoscaler(a.stdout, resp)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// getJob reads a job for a command with an -o flag.
func (a *app) getJob(cmd *cobra.Command, output, id string) (format, *weirv1.JobInfo, error) {
	f, err := parseFormat(output)
	if err != nil {
		return 0, nil, err
	}
	c, err := a.client()
	if err != nil {
		return 0, nil, err
	}
	resp, err := call(cmd.Context(), a, c.GetJob, &weirv1.GetJobRequest{JobId: id}, "get job "+id, jobNotFound(id))
	if err != nil {
		return 0, nil, err
	}
	return f, resp.GetJob(), nil
}
