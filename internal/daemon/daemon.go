// Package daemon holds what the jobmanager and taskmanager commands share:
// flags with environment overrides, logging setup and signal handling.
package daemon

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/rpc"
)

// EnvName maps a flag name to its environment variable: checkpoint-dir →
// WEIR_CHECKPOINT_DIR.
func EnvName(flagName string) string {
	return "WEIR_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ApplyEnv sets every flag not given on the command line from its
// environment variable, so flags win over the environment.
func ApplyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, e)
			}
		}
	})
	return err
}

// Storage are the checkpoint storage flags: how to reach S3 for s3://
// checkpoint directories, savepoint targets and the locations in
// checkpoints. Empty ones come from the standard AWS environment
// variables (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN).
type Storage struct {
	S3 blob.S3Config
}

// Register adds the --s3-* flags to fs.
func (s *Storage) Register(fs *flag.FlagSet) {
	fs.StringVar(&s.S3.Endpoint, "s3-endpoint", "", "S3 endpoint for s3:// locations: http://host:port, https://host or host:port (default $AWS_ENDPOINT_URL, else AWS)")
	fs.StringVar(&s.S3.Region, "s3-region", "", "S3 region (default $AWS_REGION)")
	fs.StringVar(&s.S3.PathStyle, "s3-path-style", "auto", "S3 addressing: auto (path-style for IPs, localhost and non-AWS servers), path or virtual")
	fs.StringVar(&s.S3.AccessKey, "s3-access-key-id", "", "S3 access key ID (default $AWS_ACCESS_KEY_ID)")
	fs.StringVar(&s.S3.SecretKey, "s3-secret-access-key", "", "S3 secret access key (default $AWS_SECRET_ACCESS_KEY; prefer the environment to a flag)")
}

// Configure makes s3:// locations usable in this process.
func (s *Storage) Configure() error {
	cfg := s.S3.FromEnv()
	s3, err := blob.NewS3(cfg)
	if err != nil {
		return err
	}
	blob.Default.S3, blob.Default.S3Config = s3, &cfg
	return nil
}

// Logging are the shared log flags.
type Logging struct {
	Level  string
	Format string
}

// Register adds --log-level and --log-format to fs.
func (l *Logging) Register(fs *flag.FlagSet) {
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json")
}

// Logger builds the structured logger the flags describe.
func (l *Logging) Logger(component string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch l.Format {
	case "text":
		h = slog.NewTextHandler(os.Stderr, opts)
	case "json":
		h = slog.NewJSONHandler(os.Stderr, opts)
	default:
		return nil, fmt.Errorf("--log-format: want text or json, got %q", l.Format)
	}
	return slog.New(h).With("component", component), nil
}

// Parse adds the flags every daemon has (--pprof), parses args, applies
// the environment and describes the flags in usage output.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of %s (every flag can also be set as WEIR_<FLAG>, e.g. %s):\n", fs.Name(), EnvName("rpc-addr"))
		fs.PrintDefaults()
	}
	pprof := fs.Bool("pprof", false, "serve net/http/pprof under /debug/pprof/ on the HTTP address (CPU and heap profiles; off by default: it exposes internals)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := ApplyEnv(fs); err != nil {
		return err
	}
	if *pprof {
		rpc.EnablePprof()
	}
	return nil
}

// SignalContext is cancelled on SIGINT or SIGTERM, for graceful shutdown.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Exit prints err and exits non-zero; flag.ErrHelp exits zero.
func Exit(name string, err error) {
	if err == nil || err == flag.ErrHelp {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}

// EtcdClient connects to etcd; endpoints is comma-separated.
func EtcdClient(endpoints string) (*clientv3.Client, error) {
	var eps []string
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("--etcd-endpoints: no endpoint in %q", endpoints)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", eps, err)
	}
	return c, nil
}
