// Package kafkacfg reads the Kafka connectors' configuration, for the
// connectors and for the job graph's validation at submit (which must not
// need a Kafka client).
package kafkacfg

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/sdk"
)

// Delivery is what a kafka-sink promises.
type Delivery int

const (
	// ExactlyOnce writes each checkpoint's records in one transaction
	// per subtask, committed once the checkpoint completed: consumers
	// reading read_committed see every record once.
	ExactlyOnce Delivery = iota
	// AtLeastOnce flushes at every checkpoint: nothing is lost, a restore
	// may write records again.
	AtLeastOnce
	// None writes as records come.
	None
)

// SinkConfig is a kafka-sink's configuration.
type SinkConfig struct {
	Topic string
	// TopicHeader names the header that, on a record carrying it, names
	// the record's topic instead of Topic; it is not written to Kafka.
	TopicHeader        string
	Delivery           Delivery
	TransactionalID    string // prefix
	TransactionTimeout time.Duration
	// TransactionMaxAge is how long the sink carries an uncommitted
	// transaction (over aborted checkpoints, lost notifications) before it
	// fails so the job restores its last completed checkpoint, which
	// commits or aborts it: the broker would abort it at
	// TransactionTimeout, losing its records.
	TransactionMaxAge time.Duration
	// Tombstones: a record with an empty value is written with a null
	// value, a tombstone (an upsert SQL sink's deletion of its key); and
	// a record without a key with the empty key, never Kafka's null one
	// (an empty key crosses the network as none).
	Tombstones bool
}

// DefaultTransactionTimeout is Kafka's default upper bound for a
// transaction's timeout (transaction.max.timeout.ms).
const DefaultTransactionTimeout = 15 * time.Minute

// ParseSinkConfig reads topic, topic-header, delivery (exactly-once, at-least-once or
// none; exactly-once by default), transactional-id-prefix (required for
// exactly-once), transaction-timeout and transaction-max-age (half the
// timeout by default).
func ParseSinkConfig(cfg sdk.Config) (SinkConfig, error) {
	var c SinkConfig
	var err error
	if c.Topic, err = cfg.String("topic", ""); err != nil {
		return c, err
	}
	if c.Topic == "" {
		return c, errors.New(`config "topic": required (with topic-header, for records without that header)`)
	}
	if c.TopicHeader, err = cfg.String("topic-header", ""); err != nil {
		return c, err
	}
	switch v := cfg["tombstones"].(type) {
	case nil:
	case bool:
		c.Tombstones = v
	default:
		return c, fmt.Errorf(`config "tombstones": want true or false, got %v`, v)
	}
	d, err := cfg.String("delivery", "exactly-once")
	if err != nil {
		return c, err
	}
	switch d {
	case "exactly-once":
		c.Delivery = ExactlyOnce
	case "at-least-once":
		c.Delivery = AtLeastOnce
	case "none":
		c.Delivery = None
	default:
		return c, fmt.Errorf(`config "delivery": unknown delivery %q (want exactly-once, at-least-once or none)`, d)
	}
	if c.TransactionalID, err = cfg.String("transactional-id-prefix", ""); err != nil {
		return c, err
	}
	if c.Delivery == ExactlyOnce && c.TransactionalID == "" {
		return c, errors.New(`config "transactional-id-prefix": required for delivery exactly-once (it names the sink's transactions, and must be unique among running jobs)`)
	}
	if c.TransactionTimeout, err = cfg.Duration("transaction-timeout", DefaultTransactionTimeout); err != nil {
		return c, err
	}
	if c.TransactionTimeout <= 0 {
		return c, fmt.Errorf(`config "transaction-timeout": must be positive, got %s`, c.TransactionTimeout)
	}
	if c.TransactionMaxAge, err = cfg.Duration("transaction-max-age", c.TransactionTimeout/2); err != nil {
		return c, err
	}
	if c.TransactionMaxAge <= 0 || c.TransactionMaxAge >= c.TransactionTimeout {
		return c, fmt.Errorf(`config "transaction-max-age": must be positive and below transaction-timeout (%s), got %s`, c.TransactionTimeout, c.TransactionMaxAge)
	}
	return c, nil
}

// Start is where a kafka-source partition with no restored position
// starts at the job's first start.
type Start int

const (
	StartEarliest Start = iota
	StartLatest
	StartCommitted
	StartTimestamp
)

// SourceConfig is a kafka-source's configuration, but for the client
// settings (ParseClient). Servers is bootstrap-servers, for messages.
type SourceConfig struct {
	Servers       string
	Topics        []string
	Pattern       *regexp.Regexp
	Group         string
	Start         Start
	StartMillis   int64 // StartTimestamp
	ReadCommitted bool
	Discovery     time.Duration
	Bounded       bool
	Timeout       time.Duration
	// BacklogLag: a partition this many records or more behind its end
	// makes the source report a backlog; 0 never reports one.
	BacklogLag int64
}

// ParseSourceConfig reads topic, topics or topic-pattern, group-id,
// starting-offsets, isolation, partition-discovery-interval, bounded,
// open-timeout and backlog-lag.
func ParseSourceConfig(cfg sdk.Config) (SourceConfig, error) {
	var c SourceConfig
	var err error
	if c.Servers, err = cfg.String("bootstrap-servers", ""); err != nil {
		return c, err
	}
	topic, err := cfg.String("topic", "")
	if err != nil {
		return c, err
	}
	pattern, err := cfg.String("topic-pattern", "")
	if err != nil {
		return c, err
	}
	var topics []string
	if v, ok := cfg["topics"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			if ss, isStrings := v.([]string); isStrings {
				list = make([]any, len(ss))
				for i, s := range ss {
					list[i] = s
				}
			} else {
				return c, fmt.Errorf(`config "topics": want a list of topic names, got %T`, v)
			}
		}
		for i, t := range list {
			s, ok := t.(string)
			if !ok || s == "" {
				return c, fmt.Errorf(`config "topics"[%d]: want a topic name, got %v`, i, t)
			}
			topics = append(topics, s)
		}
		if len(topics) == 0 {
			return c, fmt.Errorf(`config "topics": empty`)
		}
	}
	switch n := count(topic != "") + count(topics != nil) + count(pattern != ""); {
	case n == 0:
		return c, fmt.Errorf(`config: one of "topic", "topics" or "topic-pattern" is required`)
	case n > 1:
		return c, fmt.Errorf(`config: give only one of "topic", "topics" and "topic-pattern"`)
	case topic != "":
		c.Topics = []string{topic}
	case pattern != "":
		if c.Pattern, err = regexp.Compile(pattern); err != nil {
			return c, fmt.Errorf(`config "topic-pattern": %w`, err)
		}
	default:
		slices.Sort(topics)
		c.Topics = slices.Compact(topics)
	}
	if c.Group, err = cfg.String("group-id", ""); err != nil {
		return c, err
	}
	start, err := cfg.String("starting-offsets", "earliest")
	if err != nil {
		return c, err
	}
	switch {
	case start == "earliest":
		c.Start = StartEarliest
	case start == "latest":
		c.Start = StartLatest
	case start == "committed":
		if c.Group == "" {
			return c, fmt.Errorf(`config "starting-offsets": committed needs "group-id"`)
		}
		c.Start = StartCommitted
	case strings.HasPrefix(start, "timestamp:"):
		ms, err := strconv.ParseInt(strings.TrimPrefix(start, "timestamp:"), 10, 64)
		if err != nil || ms < 0 {
			return c, fmt.Errorf(`config "starting-offsets": %q: want timestamp:<milliseconds since the epoch>`, start)
		}
		c.Start, c.StartMillis = StartTimestamp, ms
	default:
		return c, fmt.Errorf(`config "starting-offsets": %q: want earliest, latest, committed or timestamp:<ms>`, start)
	}
	isolation, err := cfg.String("isolation", "read-committed")
	if err != nil {
		return c, err
	}
	switch isolation {
	case "read-committed":
		c.ReadCommitted = true
	case "read-uncommitted":
	default:
		return c, fmt.Errorf(`config "isolation": %q: want read-committed or read-uncommitted`, isolation)
	}
	if c.Discovery, err = cfg.Duration("partition-discovery-interval", 0); err != nil {
		return c, err
	}
	if c.Discovery < 0 {
		return c, fmt.Errorf(`config "partition-discovery-interval": negative`)
	}
	bounded, err := cfg.String("bounded", "")
	if err != nil {
		return c, err
	}
	switch bounded {
	case "":
	case "latest":
		c.Bounded = true
	default:
		return c, fmt.Errorf(`config "bounded": %q: want latest (or leave it out for an unbounded source)`, bounded)
	}
	if c.Bounded && c.Discovery > 0 {
		// A bounded source reads what was there when it started: it has
		// no end offset for a partition created later.
		return c, fmt.Errorf(`config: "partition-discovery-interval" does not go with "bounded"`)
	}
	if c.Timeout, err = cfg.Duration("open-timeout", 10*time.Second); err != nil {
		return c, err
	}
	if c.Timeout <= 0 {
		return c, fmt.Errorf(`config "open-timeout": must be positive`)
	}
	if c.BacklogLag, err = cfg.Int("backlog-lag", 0); err != nil {
		return c, err
	}
	if c.BacklogLag < 0 {
		return c, fmt.Errorf(`config "backlog-lag": negative`)
	}
	return c, nil
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Client is the settings every connector's client shares.
type Client struct {
	Seeds []string
	// TLS is nil without tls; its files are read where the client runs.
	TLS  *TLS
	SASL *SASL
}

// TLS is tls: {ca, cert, key}, file paths; all optional.
type TLS struct{ CA, Cert, Key string }

// SASL is sasl: {mechanism, username, password}.
type SASL struct {
	Mechanism      string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	User, Password string
}

// ParseClient reads bootstrap-servers (host:port, comma-separated), tls
// and sasl.
func ParseClient(cfg sdk.Config) (Client, error) {
	var c Client
	servers, err := cfg.String("bootstrap-servers", "")
	if err != nil {
		return c, err
	}
	for s := range strings.SplitSeq(servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Seeds = append(c.Seeds, s)
		}
	}
	if len(c.Seeds) == 0 {
		return c, errors.New(`config "bootstrap-servers": required (host:port, comma-separated)`)
	}
	tlsCfg, err := cfg.Sub("tls")
	if err != nil {
		return c, err
	}
	if tlsCfg != nil {
		c.TLS = &TLS{}
		for key, dst := range map[string]*string{"ca": &c.TLS.CA, "cert": &c.TLS.Cert, "key": &c.TLS.Key} {
			if *dst, err = tlsCfg.String(key, ""); err != nil {
				return c, fmt.Errorf(`config "tls": %w`, err)
			}
		}
		if (c.TLS.Cert == "") != (c.TLS.Key == "") {
			return c, errors.New(`config "tls": give both "cert" and "key", or neither`)
		}
	}
	saslCfg, err := cfg.Sub("sasl")
	if err != nil {
		return c, err
	}
	if saslCfg != nil {
		c.SASL = &SASL{}
		if c.SASL.Mechanism, err = saslCfg.String("mechanism", "PLAIN"); err != nil {
			return c, err
		}
		c.SASL.Mechanism = strings.ToUpper(c.SASL.Mechanism)
		switch c.SASL.Mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return c, fmt.Errorf(`config "sasl.mechanism": unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)`, c.SASL.Mechanism)
		}
		if c.SASL.User, err = saslCfg.String("username", ""); err != nil {
			return c, err
		}
		if c.SASL.Password, err = saslCfg.String("password", ""); err != nil {
			return c, err
		}
	}
	return c, nil
}
