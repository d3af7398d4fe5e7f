package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func (a *app) checkpointCommand() *cobra.Command {
	cmd := group("checkpoint", "Inspect and trigger a job's checkpoints", "cp")
	cmd.AddCommand(a.checkpointListCommand(), a.checkpointGetCommand(), a.checkpointTriggerCommand(), a.checkpointConfigureCommand())
	return cmd
}

func (a *app) checkpointListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list JOB_ID",
		Short: "Show a job's checkpoint counts, latest checkpoints and history",
		Args:  exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseFormat(output)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			resp, err := call(cmd.Context(), a, c.ListCheckpoints, &weirv1.ListCheckpointsRequest{JobId: id},
				"list checkpoints of job "+id, jobNotFound(id))
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(a.stdout, newCheckpointListView(resp))
			}
			return writeCheckpointList(a.stdout, resp)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (a *app) checkpointGetCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get JOB_ID CHECKPOINT_ID",
		Short: "Show one checkpoint and what each subtask acknowledged",
		Args:  exactArgs("JOB_ID", "CHECKPOINT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseFormat(output)
			if err != nil {
				return err
			}
			id := args[0]
			cpID, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || cpID < 0 {
				return usageErrorf("CHECKPOINT_ID must be a checkpoint number, got %q", args[1])
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := call(cmd.Context(), a, c.GetCheckpoint, &weirv1.GetCheckpointRequest{JobId: id, CheckpointId: cpID},
				fmt.Sprintf("get checkpoint %d of job %s", cpID, id), fmt.Sprintf("checkpoint %d of job %s not found", cpID, id))
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(a.stdout, newCheckpointDetailView(resp))
			}
			return writeCheckpointDetails(a.stdout, resp)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (a *app) checkpointTriggerCommand() *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "trigger JOB_ID",
		Short: "Take a checkpoint now and print its ID and path",
		Long: `Trigger takes a checkpoint now, outside the periodic schedule, and prints
the checkpoint ID and its external path separated by a tab. It waits up to
--timeout for the checkpoint to complete.`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			resp, err := call(cmd.Context(), a, c.TriggerCheckpoint, &weirv1.TriggerCheckpointRequest{JobId: id, Full: full},
				"trigger checkpoint of job "+id, jobNotFound(id))
			if err != nil {
				return err
			}
			return writeTriggered(a.stdout, resp.GetCheckpointId(), resp.GetExternalPath())
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "take a full checkpoint even when the state backend is incremental")
	return cmd
}

func (a *app) savepointCommand() *cobra.Command {
	cmd := group("savepoint", "Take and dispose of savepoints", "sp")
	var dir string
	trigger := &cobra.Command{
		Use:   "trigger JOB_ID [--dir DIR]",
		Short: "Take a savepoint and print its ID and path",
		Long: `Trigger takes a savepoint of a running job, which keeps running, and prints
the savepoint's checkpoint ID and path separated by a tab. It waits up to
--timeout for the savepoint to complete.`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id := args[0]
			resp, err := call(cmd.Context(), a, c.TriggerSavepoint, &weirv1.TriggerSavepointRequest{JobId: id, TargetDirectory: dir},
				"trigger savepoint of job "+id, jobNotFound(id))
			if err != nil {
				return err
			}
			return writeTriggered(a.stdout, resp.GetCheckpointId(), resp.GetExternalPath())
		},
	}
	trigger.Flags().StringVar(&dir, "dir", "", "directory to write the savepoint to (default: the job's savepoint directory)")
	dispose := &cobra.Command{
		Use:   "dispose PATH",
		Short: "Delete a savepoint",
		Long: `Dispose deletes a savepoint: its directory (or the directory of the
_metadata file given). The JobManager first checks that PATH holds a savepoint
(not a checkpoint, not an unrelated directory) that no running job would
restart from, and deletes nothing otherwise.`,
		Args: exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			path := args[0]
			if _, err := call(cmd.Context(), a, c.DisposeSavepoint, &weirv1.DisposeSavepointRequest{Path: path},
				"dispose savepoint "+path, "no savepoint at "+path+" (no _metadata file there)"); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "Savepoint %s disposed.\n", path)
			return err
		},
	}
	cmd.AddCommand(trigger, dispose)
	return cmd
}

func (a *app) checkpointConfigureCommand() *cobra.Command {
	var interval, timeout, minPause, backlog time.Duration
	cmd := &cobra.Command{
		Use:   "configure JOB_ID [--interval D] [--checkpoint-timeout D] [--min-pause D] [--interval-during-backlog D]",
		Short: "Change a running job's periodic checkpointing without a restart",
		Long: `Configure changes a running job's checkpoint interval, timeout or minimum
pause between checkpoints in place: the next periodic checkpoint comes one
new interval from now, a new timeout applies to checkpoints triggered from
now on, and --interval 0 turns periodic checkpoints off;
--interval-during-backlog replaces the interval while a source reports a
backlog (0: no checkpoints then). The change is
stored with the job, so a new leader keeps it. Flags not given keep their
value.`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &weirv1.ConfigureCheckpointingRequest{JobId: args[0]}
			set := func(name string, d time.Duration) (*durationpb.Duration, error) {
				if !cmd.Flags().Changed(name) {
					return nil, nil
				}
				if d < 0 {
					return nil, usageErrorf("--%s %v: must not be negative", name, d)
				}
				return durationpb.New(d), nil
			}
			var err error
			if req.Interval, err = set("interval", interval); err != nil {
				return err
			}
			if req.Timeout, err = set("checkpoint-timeout", timeout); err != nil {
				return err
			}
			if req.MinPause, err = set("min-pause", minPause); err != nil {
				return err
			}
			if req.IntervalDuringBacklog, err = set("interval-during-backlog", backlog); err != nil {
				return err
			}
			if req.Interval == nil && req.Timeout == nil && req.MinPause == nil && req.IntervalDuringBacklog == nil {
				return usageErrorf("give at least one of --interval, --checkpoint-timeout, --min-pause, --interval-during-backlog")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := call(cmd.Context(), a, c.ConfigureCheckpointing, req, "configure checkpointing of job "+args[0], jobNotFound(args[0]))
			if err != nil {
				return err
			}
			cp := resp.GetCheckpointing()
			_, err = fmt.Fprintf(a.stdout, "Checkpointing of job %s: interval %v, timeout %v, min-pause %v.\n", args[0],
				cp.GetInterval().AsDuration(), cp.GetTimeout().AsDuration(), cp.GetMinPause().AsDuration())
			return err
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 0, "time between periodic checkpoints (0 turns them off)")
	// Not --timeout: that is every command's call timeout.
	cmd.Flags().DurationVar(&timeout, "checkpoint-timeout", 0, "how long a checkpoint may take before it is aborted")
	cmd.Flags().DurationVar(&minPause, "min-pause", 0, "minimum time between the end of one checkpoint and the start of the next")
	cmd.Flags().DurationVar(&backlog, "interval-during-backlog", 0, "time between periodic checkpoints while a source reports a backlog (0: none then)")
	return cmd
}
