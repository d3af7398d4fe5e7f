// Command weir is the command-line client of a Weir cluster: it submits job
// specs and SQL scripts to the JobManager and inspects and controls running
// jobs, their checkpoints and savepoints. It links PostgreSQL's parser
// through cgo (internal/sql/compile), so unlike the daemons it is built
// with cgo, linked statically.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	_ "github.com/weirproject/weir/internal/connector/builtin" // the built-in connectors, for the job graph's validation

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/weirproject/weir/internal/auth"
	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/tlsconfig"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
)

const (
	defaultJobManager = "localhost:6123"
	envJobManager     = "WEIR_JOBMANAGER"
	envEtcdEndpoints  = "WEIR_ETCD_ENDPOINTS"
	envToken          = "WEIR_TOKEN"
)

// fileFlags are the flags naming TLS and token files, each with the environment
// variable that replaces its empty default, as the daemons' do.
var fileFlags = []struct{ flag, env, usage string }{
	{"tls-cert", "WEIR_TLS_CERT", "PEM client certificate for mutual TLS with the JobManager (with --tls-key and --tls-ca)"},
	{"tls-key", "WEIR_TLS_KEY", "PEM private key of --tls-cert"},
	{"tls-ca", "WEIR_TLS_CA", "PEM CA certificates that verify the JobManager"},
	{"etcd-cert", "WEIR_ETCD_CERT", "PEM client certificate for etcd (with --etcd-key)"},
	{"etcd-key", "WEIR_ETCD_KEY", "PEM private key of --etcd-cert"},
	{"etcd-ca", "WEIR_ETCD_CA", "PEM CA certificates that verify etcd (default the system's)"},
	{"token-file", "WEIR_TOKEN_FILE", "file whose first line is the bearer token for a JobManager started with --auth-token-file; without it the token is $" + envToken},
}

// Exit codes: scripts can tell a mistyped command from a failed one.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv))
}

// app holds what every command shares; it is built per run so tests can run
// the CLI in-process with their own streams and environment.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)

	addr    string
	timeout time.Duration
	// etcdEndpoints, when set, locate the leader instead of addr.
	etcdEndpoints, clusterID string
	// kube, when its kubeconfig is set, locates the leader through the
	// cluster's Lease on Kubernetes instead of addr.
	kube daemon.Kube
	// tls turns on mutual TLS with the JobManager; etcdTLS, TLS to etcd.
	tls, etcdTLS tlsconfig.Files
	// tokenFile holds the bearer token of a JobManager with
	// --auth-token-file; without it the token comes from $WEIR_TOKEN.
	tokenFile string

	// started is set when a command's RunE begins: cobra's own errors
	// before it (unknown flags, missing arguments or required flags) are
	// the user's usage mistakes.
	started bool
	conn    *grpc.ClientConn
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, lookupEnv: lookupEnv}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if a.conn != nil {
		// Nothing is in flight any more; a close error would not change
		// the outcome of the command.
		_ = a.conn.Close()
	}
	if err == nil {
		return exitOK
	}
	if ue, ok := errors.AsType[*usageError](err); ok || !a.started {
		msg := err.Error()
		if ue != nil {
			msg = ue.Error()
		}
		fmt.Fprintf(stderr, "weir: %s\nRun '%s --help' for usage.\n", msg, cmd.CommandPath())
		return exitUsage
	}
	if se, ok := errors.AsType[*scriptError](err); ok {
		fmt.Fprintln(stderr, se.msg)
		return exitError
	}
	msg := err.Error()
	if errors.Is(err, jobgraph.ErrInvalidSpec) {
		// The CLI's own prefix says where the message comes from.
		msg = strings.TrimPrefix(msg, "jobgraph: ")
	}
	fmt.Fprintf(stderr, "weir: %s\n", msg)
	return exitError
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "weir",
		Short: "Control a Weir stream processing cluster",
		Long: `weir submits jobs to a Weir JobManager and inspects and controls them.

The JobManager's address comes from --jobmanager, else from the
` + envJobManager + ` environment variable, else ` + defaultJobManager + `.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("jobmanager") {
				if v, ok := a.lookupEnv(envJobManager); ok && v != "" {
					a.addr = v
				}
			}
			if a.timeout <= 0 {
				return usageErrorf("--timeout must be positive, got %s", a.timeout)
			}
			if v, ok := a.lookupEnv("WEIR_TLS_SERVER_NAME"); ok && !cmd.Flags().Changed("tls-server-name") {
				a.tls.ServerName = v
			}
			if !cmd.Flags().Changed("etcd-endpoints") {
				if v, ok := a.lookupEnv(envEtcdEndpoints); ok {
					a.etcdEndpoints = v
				}
			}
			for _, f := range fileFlags {
				if v, ok := a.lookupEnv(f.env); ok && !cmd.Flags().Changed(f.flag) {
					if err := cmd.Flags().Set(f.flag, v); err != nil {
						return usageErrorf("$%s: %v", f.env, err)
					}
				}
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&a.addr, "jobmanager", defaultJobManager,
		"JobManager address host:port; $"+envJobManager+" replaces the default")
	root.PersistentFlags().DurationVar(&a.timeout, "timeout", 10*time.Second, "timeout of each call to the JobManager")
	root.PersistentFlags().StringVar(&a.etcdEndpoints, "etcd-endpoints", "",
		"find the JobManager leader through etcd (comma-separated endpoints) instead of --jobmanager; $"+envEtcdEndpoints)
	root.PersistentFlags().StringVar(&a.clusterID, "cluster-id", "default", "cluster name in etcd or on Kubernetes (with --etcd-endpoints or --kubeconfig)")
	root.PersistentFlags().StringVar(&a.tls.ServerName, "tls-server-name", "", "name the JobManager's certificate is verified against instead of its address (a cluster on Kubernetes: weir-<cluster-id>); $WEIR_TLS_SERVER_NAME")
	root.PersistentFlags().StringVar(&a.kube.Kubeconfig, "kubeconfig", "", "find the JobManager leader through the cluster's Lease on the Kubernetes API server this kubeconfig file reaches, instead of --jobmanager (--ha kubernetes)")
	root.PersistentFlags().StringVar(&a.kube.Namespace, "kube-namespace", "", "namespace of the cluster's Lease (with --kubeconfig; default the kubeconfig context's)")
	files := []*string{&a.tls.Cert, &a.tls.Key, &a.tls.CA, &a.etcdTLS.Cert, &a.etcdTLS.Key, &a.etcdTLS.CA, &a.tokenFile}
	for i, f := range fileFlags {
		root.PersistentFlags().StringVar(files[i], f.flag, "", f.usage+"; $"+f.env)
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.AddCommand(a.jobCommand(), a.checkpointCommand(), a.savepointCommand(), a.taskManagerCommand(), a.certsCommand(), a.sqlCommand(), a.stateCommand())
	a.markStart(root)
	return root
}

func (a *app) markStart(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			a.started = true
			return run(cmd, args)
		}
	}
	for _, sub := range cmd.Commands() {
		a.markStart(sub)
	}
}

// usageError marks a mistake in how weir was invoked (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exactArgs replaces cobra.ExactArgs to name the missing arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErrorf("%s needs %d argument(s): %s; got %d", cmd.CommandPath(), len(names), strings.Join(names, " "), len(args))
		}
		for i, arg := range args {
			if arg == "" {
				return usageErrorf("%s must not be empty", names[i])
			}
		}
		return nil
	}
}

// client connects lazily so that commands failing before their first call,
// such as a submit with an invalid spec, never touch the network.
func (a *app) client() (weirv1grpc.ClientServiceClient, error) {
	if a.conn != nil {
		return weirv1grpc.NewClientServiceClient(a.conn), nil
	}
	// A short-lived command has no use for the reload messages.
	quiet := slog.New(slog.DiscardHandler)
	r, err := daemon.MutualTLS(a.tls, quiet)
	if err != nil {
		return nil, err
	}
	switch {
	case a.kube.Kubeconfig != "":
		addr, err := kubeLeaderAddress(a.kube, a.clusterID, a.timeout)
		if err != nil {
			return nil, err
		}
		a.addr = addr
	case a.etcdEndpoints != "":
		addr, err := leaderAddress(a.etcdEndpoints, a.clusterID, a.timeout, a.etcdTLS)
		if err != nil {
			return nil, err
		}
		a.addr = addr
	}
	opts := []grpc.DialOption{}
	token, err := a.token()
	if err != nil {
		return nil, err
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Credentials{Token: token}))
	}
	conn, err := rpc.Dial(a.addr, rpc.Credentials(r, quiet), opts...)
	if err != nil {
		return nil, fmt.Errorf("invalid JobManager address %q: %w", a.addr, err)
	}
	a.conn = conn
	return weirv1grpc.NewClientServiceClient(a.conn), nil
}

// token is the bearer token to send: the first line of --token-file, else
// $WEIR_TOKEN, else none.
func (a *app) token() (string, error) {
	if a.tokenFile == "" {
		v, _ := a.lookupEnv(envToken)
		return strings.TrimSpace(v), nil
	}
	data, err := os.ReadFile(a.tokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("--token-file %s: its first line holds no token", a.tokenFile)
	}
	return line, nil
}

// call makes one RPC under --timeout and turns gRPC failures into messages
// for people: what names the operation for context, notFound is the whole
// message for codes.NotFound.
func call[Req, Resp any](ctx context.Context, a *app, method func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req, what, notFound string) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	// Fail fast rather than wait out the timeout when the JobManager is
	// down: the user is at a prompt.
	resp, err := method(ctx, req, grpc.WaitForReady(false))
	if err != nil {
		var zero Resp
		return zero, a.rpcError(err, what, notFound)
	}
	return resp, nil
}

// rpcError keeps the gRPC status reachable through Unwrap while printing
// only the part a user needs.
type rpcError struct {
	msg string
	err error
}

func (e *rpcError) Error() string { return e.msg }
func (e *rpcError) Unwrap() error { return e.err }

// rpcError leaves the operation out of connection failures and NotFound,
// where it adds nothing the message does not already say.
func (a *app) rpcError(err error, what, notFound string) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	wrap := func(format string, args ...any) error {
		return &rpcError{msg: fmt.Sprintf(format, args...), err: err}
	}
	switch st.Code() {
	case codes.Unavailable:
		if a.tls.IsZero() && strings.Contains(st.Message(), "server preface") {
			// What a JobManager on mutual TLS does to a plaintext client.
			return wrap("cannot reach JobManager at %s: %s (if it runs with TLS, give --tls-cert, --tls-key and --tls-ca)", a.addr, st.Message())
		}
		return wrap("cannot reach JobManager at %s: %s", a.addr, st.Message())
	case codes.DeadlineExceeded:
		// A connected but slow JobManager (a long savepoint, say) is not
		// unreachable, and the fix differs: a longer --timeout.
		if a.conn != nil && a.conn.GetState() == connectivity.Ready {
			return wrap("JobManager at %s did not answer within %s (raise --timeout)", a.addr, a.timeout)
		}
		return wrap("cannot reach JobManager at %s: no connection within %s", a.addr, a.timeout)
	case codes.Unauthenticated:
		if tok, _ := a.token(); tok == "" {
			return wrap("%s: the JobManager at %s wants a token: give --token-file or $%s", what, a.addr, envToken)
		}
		return wrap("%s: the JobManager at %s refused the token: %s", what, a.addr, st.Message())
	case codes.PermissionDenied:
		return wrap("%s: the token may not do this: %s", what, st.Message())
	case codes.NotFound:
		if notFound != "" {
			return wrap("%s", notFound)
		}
		return wrap("%s: not found: %s", what, st.Message())
	case codes.InvalidArgument:
		return wrap("%s: rejected by the JobManager: %s", what, st.Message())
	case codes.Unimplemented:
		return wrap("%s: not supported by the JobManager at %s: %s", what, a.addr, st.Message())
	case codes.Unknown, codes.FailedPrecondition, codes.AlreadyExists, codes.Aborted:
		return wrap("%s: %s", what, st.Message())
	}
	return wrap("%s: %s: %s", what, st.Code(), st.Message())
}
