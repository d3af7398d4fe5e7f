// Package kafkacfg reads the Kafka connectors' configuration, for the
// connectors and for the job graph's validation at submit (which must not
// need a Kafka client).
package kafkacfg

import (
	"errors"
	"fmt"
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
}

// DefaultTransactionTimeout is Kafka's default upper bound for a
// transaction's timeout (transaction.max.timeout.ms).
const DefaultTransactionTimeout = 15 * time.Minute

// ParseSinkConfig reads topic, topic-header, delivery (exactly-once, at-least-once or
// none; exactly-once by default), transactional-id-prefix (required for
// exactly-once) and transaction-timeout.
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
	return c, nil
}
