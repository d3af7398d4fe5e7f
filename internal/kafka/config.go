// Package kafka holds Weir's Kafka connectors: kafka-source reads
// partitions as splits whose offsets are in the checkpoint, and kafka-sink
// writes with one transaction per subtask and checkpoint, committed when
// the checkpoint completes (Flink's two-phase commit). Both speak the
// Kafka protocol through franz-go; tests run against kfake, a
// Kafka-protocol development broker (cmd/kafka-dev), while production
// points bootstrap-servers at Kafka or Redpanda.
package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weirproject/weir/sdk"
)

// clientOptions reads the settings every connector shares:
// bootstrap-servers, and security: tls: {ca, cert, key} and sasl:
// {mechanism: PLAIN|SCRAM-SHA-256|SCRAM-SHA-512, username, password}.
func clientOptions(cfg sdk.Config) ([]kgo.Opt, error) {
	servers, err := cfg.String("bootstrap-servers", "")
	if err != nil {
		return nil, err
	}
	if servers == "" {
		return nil, fmt.Errorf(`config "bootstrap-servers": required (host:port, comma-separated)`)
	}
	var seeds []string
	for _, s := range strings.Split(servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	tlsCfg, err := cfg.Sub("tls")
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		tc, err := tlsConfig(tlsCfg)
		if err != nil {
			return nil, fmt.Errorf(`config "tls": %w`, err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	saslCfg, err := cfg.Sub("sasl")
	if err != nil {
		return nil, err
	}
	if saslCfg != nil {
		mech, err := saslCfg.String("mechanism", "PLAIN")
		if err != nil {
			return nil, err
		}
		user, err := saslCfg.String("username", "")
		if err != nil {
			return nil, err
		}
		pass, err := saslCfg.String("password", "")
		if err != nil {
			return nil, err
		}
		switch strings.ToUpper(mech) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf(`config "sasl.mechanism": unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)`, mech)
		}
	}
	return opts, nil
}

func tlsConfig(cfg sdk.Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	ca, err := cfg.String("ca", "")
	if err != nil {
		return nil, err
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %s: no certificate found", ca)
		}
		tc.RootCAs = pool
	}
	cert, err := cfg.String("cert", "")
	if err != nil {
		return nil, err
	}
	key, err := cfg.String("key", "")
	if err != nil {
		return nil, err
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
