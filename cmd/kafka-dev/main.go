// Command kafka-dev is a Kafka-protocol development broker for tests and
// the demo: an in-process kfake cluster of one node that Weir's
// kafka-source and kafka-sink (and any Kafka client) can talk to.
// Production uses Kafka or Redpanda.
//
//	kafka-dev --listen 127.0.0.1:9092 --data-dir /tmp/kafka-dev --partitions 3 --topics in,out
//
// Without --data-dir everything is in memory and gone at exit; with it
// the topics, records and group offsets are kept there and reloaded at
// the next start. It stops gracefully (persisting) on SIGTERM or SIGINT.
//
// In a container it listens on every interface and advertises the name
// clients reach it by (Kafka's advertised.listeners):
//
//	kafka-dev --listen 0.0.0.0:9092 --advertise kafka:9092
//
// `kafka-dev --check host:port` asks a broker for its metadata and exits
// 0 when it answers: a healthcheck for images without a shell.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		slog.Error("kafka-dev", "err", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kafka-dev", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9092", "host:port to listen on (and advertise)")
	dataDir := fs.String("data-dir", "", "directory to persist the broker's state in (empty: memory only)")
	partitions := fs.Int("partitions", 1, "partitions of the --topics and of topics created without a count")
	topicList := fs.String("topics", "", "comma-separated topics to create at start")
	advertise := fs.String("advertise", "", "host:port clients are told to connect to (empty: the --listen address)")
	checkAddr := fs.String("check", "", "only check that the broker at this host:port answers, then exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *checkAddr != "" {
		return check(*checkAddr)
	}
	host, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--listen %q: bad port", *listen)
	}
	if *partitions < 1 {
		return fmt.Errorf("--partitions must be at least 1")
	}
	var topics []string
	for t := range strings.SplitSeq(*topicList, ",") {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		// kfake listens on 127.0.0.1; bind the host asked for instead
		// (the broker advertises the address it listens on).
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, net.JoinHostPort(host, portStr))
			if err != nil || *advertise == "" {
				return ln, err
			}
			return advertised{ln, *advertise}, nil
		}),
		kfake.DefaultNumPartitions(*partitions),
		kfake.SeedTopics(-1, topics...),
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker on %s: %w", *listen, err)
	}
	defer c.Close() // persists into --data-dir
	addr := c.ListenAddrs()[0]
	// State reloaded from --data-dir skips the seeding: create the topics
	// that are not there yet.
	if err := createTopics(addr, topics, *partitions); err != nil {
		return err
	}
	slog.Info("kafka-dev broker listening", "addr", addr, "data-dir", *dataDir, "topics", topics, "partitions", *partitions)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	slog.Info("kafka-dev shutting down")
	return nil
}

// advertised is a listener whose address is the one clients are told:
// kfake advertises its listener's address.
type advertised struct {
	net.Listener
	addr string
}

func (a advertised) Addr() net.Addr { return advertisedAddr(a.addr) }

type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// check asks the broker at addr for its metadata.
func check(addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("broker %s: %w", addr, err)
	}
	return nil
}

func createTopics(addr string, topics []string, partitions int) error {
	if len(topics) == 0 {
		return nil
	}
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, int32(partitions), 1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", topics, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}
