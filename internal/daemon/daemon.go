// Package daemon holds what the jobmanager and taskmanager commands share:
// flags with environment overrides, logging setup and signal handling.
package daemon

import (
	"context"
	"crypto/tls"
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
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/rpc"
	"github.com/weirproject/weir/internal/tlsconfig"
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
	fs.BoolVar(&s.S3.AllowUnconditionalCreate, "s3-allow-unconditional-create", false, "accept an S3 server that ignores If-None-Match on PUT: checkpoint metadata is then created by write-and-verify, which two racing writers can both pass (off: such a server is refused)")
}

// Configure makes s3:// locations usable in this process.
func (s *Storage) Configure() error {
	cfg := s.S3.FromEnv()
	s3, err := s3blob.New(cfg)
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

// TLS are the flags securing a daemon's connections: mutual TLS on gRPC
// (and HTTPS on its HTTP address), TLS to etcd.
type TLS struct {
	GRPC tlsconfig.Files
	Etcd tlsconfig.Files
}

// Register adds --tls-cert, --tls-key, --tls-ca and --etcd-cert,
// --etcd-key, --etcd-ca to fs.
func (t *TLS) Register(fs *flag.FlagSet) {
	fs.StringVar(&t.GRPC.Cert, "tls-cert", "", "PEM certificate for mutual TLS on every gRPC connection and HTTPS on the HTTP address (with --tls-key and --tls-ca; reloaded when the file changes)")
	fs.StringVar(&t.GRPC.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&t.GRPC.CA, "tls-ca", "", "PEM CA certificates: gRPC peers must present a certificate they signed")
	fs.StringVar(&t.GRPC.ServerName, "tls-server-name", "", "name every peer's certificate is verified against instead of the address dialled (with --tls-cert; on Kubernetes, where pods are reached by IP, the name the cluster's certificate carries)")
	fs.StringVar(&t.Etcd.Cert, "etcd-cert", "", "PEM client certificate for etcd (with --etcd-key)")
	fs.StringVar(&t.Etcd.Key, "etcd-key", "", "PEM private key of --etcd-cert")
	fs.StringVar(&t.Etcd.CA, "etcd-ca", "", "PEM CA certificates that verify etcd's server certificate (default the system's); any of --etcd-cert, --etcd-key, --etcd-ca turns on TLS to etcd")
}

// MutualTLS loads the --tls-* files: nil when none is given, an error
// when only some are, since mutual TLS needs all three.
func MutualTLS(f tlsconfig.Files, log *slog.Logger) (*tlsconfig.Reloader, error) {
	if (f == tlsconfig.Files{ServerName: f.ServerName}) {
		return nil, nil
	}
	if err := together("mutual TLS", flagFile{"--tls-cert", f.Cert}, flagFile{"--tls-key", f.Key}, flagFile{"--tls-ca", f.CA}); err != nil {
		return nil, err
	}
	return tlsconfig.New(f, log)
}

// flagFile is a file flag's name and value.
type flagFile struct{ flag, value string }

// together refuses some of files without the others.
func together(what string, files ...flagFile) error {
	var names, missing []string
	for _, f := range files {
		names = append(names, f.flag)
		if f.value == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) == 0 || len(missing) == len(files) {
		return nil
	}
	return fmt.Errorf("%s needs all of %s: missing %s", what, strings.Join(names, ", "), strings.Join(missing, ", "))
}

// ServerTLS loads a certificate served without client certificates
// (HTTPS): nil when neither file is given.
func ServerTLS(certFlag, cert, keyFlag, key string, log *slog.Logger) (*tlsconfig.Reloader, error) {
	if cert == "" && key == "" {
		return nil, nil
	}
	if err := together("HTTPS", flagFile{certFlag, cert}, flagFile{keyFlag, key}); err != nil {
		return nil, err
	}
	return tlsconfig.New(tlsconfig.Files{Cert: cert, Key: key}, log)
}

// EtcdClient connects to etcd; endpoints is comma-separated. With any of
// tlsFiles it speaks TLS, presenting the certificate if one is given.
func EtcdClient(endpoints string, tlsFiles tlsconfig.Files, log *slog.Logger) (*clientv3.Client, error) {
	var eps []string
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("--etcd-endpoints: no endpoint in %q", endpoints)
	}
	cfg := clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		// A member that dies with its host (or behind a partition) sends no
		// reset: without keepalives its connection stays "ready" for the
		// kernel's TCP timeout, and requests balanced to it time out. 10 s
		// is the least gRPC's client pings at, and above etcd's default
		// --grpc-keepalive-min-time (5 s), so etcd never refuses the pings.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	}
	if !tlsFiles.IsZero() {
		if err := together("TLS to etcd", flagFile{"--etcd-cert", tlsFiles.Cert}, flagFile{"--etcd-key", tlsFiles.Key}); err != nil {
			return nil, err
		}
		r, err := tlsconfig.New(tlsFiles, log)
		if err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
		// The client certificate follows its files; the CA is read once,
		// as etcd's client keeps one configuration for its lifetime.
		cfg.TLS = r.ClientConfig(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", eps, err)
	}
	return c, nil
}
