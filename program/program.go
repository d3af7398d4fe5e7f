// Package program is the entry point of a Weir job written in Go: the
// same binary submits the job, runs the TaskManagers that run it, and
// prints its plan. A job's main is one call:
//
//	func main() {
//		job := weir.NewJob("page-views", weir.Checkpointing(10*time.Second))
//		// … sources, operators, sinks …
//		program.Main(job)
//	}
//
// It is apart from the programming model (package weir) as Beam's beamx is
// apart from Beam's: the model does not link the CLI, gRPC or the
// TaskManager.
package program

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/worker"
)

// Main is the program's main: the same binary submits the job and runs
// the TaskManagers that run it.
//
//	./prog submit --jobmanager ADDR [--from PATH]   submit the job, print its ID
//	./prog taskmanager [taskmanager flags]          run a TaskManager for it
//	./prog plan                                     print the job graph as YAML
//
// The JobManager is the stock one (bin/jobmanager): it runs any program's
// jobs, on TaskManagers built from that program.
func Main(j *weir.Job) {
	os.Exit(Run(j, os.Args[1:], os.Stdout, os.Stderr))
}

// Run is Main with explicit arguments and streams; it returns the exit
// code (2 for a usage mistake, 1 for a failure).
func Run(j *weir.Job, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "prog",
		Short:         fmt.Sprintf("Weir job %q: submit it, run a TaskManager for it, or print its plan", j.Name()),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(context.Background())

	// ran: a command started; errors before are usage mistakes.
	ran := false
	var addr, from string
	var timeout time.Duration
	var tlsFiles tlsconfig.Files
	submit := &cobra.Command{
		Use:   "submit",
		Short: "Submit the job to a JobManager and print its ID",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ran = true
			g, err := j.Graph()
			if err != nil {
				return err
			}
			if from != "" {
				g.RestoreFrom = from
			}
			id, err := submitGraph(cmd.Context(), addr, timeout, tlsFiles, g)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, id)
			return nil
		},
	}
	addr = envOr("WEIR_JOBMANAGER", "localhost:6123")
	submit.Flags().StringVar(&addr, "jobmanager", addr, "JobManager gRPC address (env WEIR_JOBMANAGER)")
	submit.Flags().StringVar(&from, "from", "", "start from this savepoint or retained checkpoint")
	submit.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the JobManager")
	submit.Flags().StringVar(&tlsFiles.Cert, "tls-cert", envOr("WEIR_TLS_CERT", ""), "PEM client certificate for mutual TLS with the JobManager (env WEIR_TLS_CERT)")
	submit.Flags().StringVar(&tlsFiles.Key, "tls-key", envOr("WEIR_TLS_KEY", ""), "PEM private key of --tls-cert (env WEIR_TLS_KEY)")
	submit.Flags().StringVar(&tlsFiles.CA, "tls-ca", envOr("WEIR_TLS_CA", ""), "PEM CA certificates that verify the JobManager (env WEIR_TLS_CA)")

	tm := &cobra.Command{
		Use:                "taskmanager [taskmanager flags]",
		Short:              "Run a TaskManager that runs this program's vertices (the stock taskmanager's flags; -h lists them)",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			ran = true
			if _, err := j.Graph(); err != nil {
				return err
			}
			return worker.Run(j.Registry(), args)
		},
	}

	plan := &cobra.Command{
		Use:   "plan",
		Short: "Print the job graph as YAML",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ran = true
			g, err := j.Graph()
			if err != nil {
				return err
			}
			b, err := jobgraph.MarshalSpec(g)
			if err != nil {
				return err
			}
			_, err = stdout.Write(b)
			return err
		},
	}
	root.AddCommand(submit, tm, plan)
	cmd, err := root.ExecuteC()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case cmd == root || !ran:
		// cobra's own: an unknown command or flag, a missing argument.
		fmt.Fprintf(stderr, "%v\n%s", err, cmd.UsageString())
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	return 1
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func submitGraph(ctx context.Context, addr string, timeout time.Duration, tlsFiles tlsconfig.Files, g *weirv1.JobGraph) (string, error) {
	quiet := slog.New(slog.DiscardHandler)
	r, err := daemon.MutualTLS(tlsFiles, quiet)
	if err != nil {
		return "", fmt.Errorf("weir: %w", err)
	}
	conn, err := rpc.Dial(addr, rpc.Credentials(r, quiet))
	if err != nil {
		return "", fmt.Errorf("weir: connect to the JobManager at %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := weirv1grpc.NewClientServiceClient(conn).SubmitJob(ctx, &weirv1.SubmitJobRequest{Job: g}, grpc.WaitForReady(true))
	if err != nil {
		return "", fmt.Errorf("weir: submit job %q to %s: %w", g.GetName(), addr, err)
	}
	return resp.GetJobId(), nil
}
