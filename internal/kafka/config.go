// Package kafka holds Weir's Kafka connectors: kafka-source reads
// partitions as splits whose offsets are in the checkpoint, and kafka-sink
// writes with one transaction per subtask and checkpoint, committed when
// the checkpoint completes (Flink's two-phase commit). Both speak the
// Kafka protocol through franz-go; tests run against kfake, a
// Kafka-protocol development broker (cmd/kafka-dev), while production
// points bootstrap-servers at Kafka or Redpanda.
package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weirproject/weir/internal/kafka/kafkacfg"
	"github.com/weirproject/weir/sdk"
)

// clientOptions makes the client options of the settings every connector
// shares (kafkacfg.ParseClient), reading the TLS files; the client logs
// to log.
func clientOptions(cfg sdk.Config, log *slog.Logger) ([]kgo.Opt, error) {
	c, err := kafkacfg.ParseClient(cfg)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Seeds...), kgo.WithLogger(kgoLogger{log})}
	if c.TLS != nil {
		tc, err := tlsConfig(c.TLS)
		if err != nil {
			return nil, fmt.Errorf(`config "tls": %w`, err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if a := c.SASL; a != nil {
		switch a.Mechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: a.User, Pass: a.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: a.User, Pass: a.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: a.User, Pass: a.Password}.AsSha512Mechanism()))
		}
	}
	return opts, nil
}

func tlsConfig(c *kafkacfg.TLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %s: no certificate found", c.CA)
		}
		tc.RootCAs = pool
	}
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// kgoLogger hands franz-go's log to the subtask's logger one level down:
// its errors and warnings as such, its info (a transaction ended, a
// producer ID loaded) as debug, its debug below that, so a daemon at the
// info level logs only what needs a reader.
type kgoLogger struct{ l *slog.Logger }

const slogTrace = slog.LevelDebug - 4

func (k kgoLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case k.l == nil:
		return kgo.LogLevelNone
	case k.l.Enabled(ctx, slogTrace):
		return kgo.LogLevelDebug
	case k.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelInfo
	case k.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelError
	switch level {
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	case kgo.LogLevelInfo:
		l = slog.LevelDebug
	case kgo.LogLevelDebug:
		l = slogTrace
	}
	k.l.Log(context.Background(), l, "kafka client: "+msg, keyvals...)
}
