package kafkacfg

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/internal/connector"
	"github.com/weirproject/weir/internal/jobgraph"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// RestoreAllowance is the time the check of a kafka-sink leaves for a
// failed-over job to be deployed again and for its sinks to commit at
// their restore.
const RestoreAllowance = 10 * time.Second

var clientKeys = []connector.Key{
	{Name: "bootstrap-servers", Type: "host:port list", Required: true, Doc: "The brokers, comma-separated."},
	{Name: "tls", Type: "{ca, cert, key}", Doc: "TLS to the brokers: PEM file paths, each optional."},
	{Name: "sasl", Type: "{mechanism, username, password}", Doc: "SASL authentication: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`."},
	{Name: "open-timeout", Type: "duration", Default: "10s", Doc: "How long unreachable brokers or missing topics may keep a subtask from starting before it fails, naming them."},
}

func init() {
	connector.Register(connector.Spec{
		Name: "kafka-source",
		Kind: connector.Source,
		Doc: "Reads Kafka (any Kafka-protocol broker) exactly once: partitions are splits, each one's next " +
			"offset is in every checkpoint, so a restore at any parallelism reads on from there. A record's key, " +
			"value, timestamp (its event time) and headers reach the job.",
		Keys: append([]connector.Key{
			{Name: "topic", Type: "string", Doc: "The topic to read; or `topics` (a list), or `topic-pattern` (a regular expression)."},
			{Name: "group-id", Type: "string", Doc: "Consumer group that offsets are committed to after each completed checkpoint, for monitoring only."},
			{Name: "starting-offsets", Type: "`earliest`, `latest`, `committed`, `timestamp:<ms>`", Default: "earliest", Doc: "Where a first start reads from; `committed` needs `group-id`. A restore reads from its checkpoint."},
			{Name: "isolation", Type: "`read-committed`, `read-uncommitted`", Default: "read-committed", Doc: "Whether records of open or aborted transactions are read."},
			{Name: "partition-discovery-interval", Type: "duration", Doc: "How often new partitions (and topics of a pattern) are looked for; new ones are read from their start. Unset: never."},
			{Name: "bounded", Type: "`latest`", Doc: "Stop at the offsets found at the first start: the job is bounded."},
			{Name: "backlog-lag", Type: "records", Doc: "Report a backlog while a partition is this far behind, so `checkpointing.interval-during-backlog` applies."},
		}, clientKeys...),
		Check: func(_ *weirv1.JobGraph, v *weirv1.JobVertex) []connector.Problem {
			cfg := sdk.Config(v.GetConfig().AsMap())
			if _, err := ParseClient(cfg); err != nil {
				return []connector.Problem{{Msg: err.Error()}}
			}
			if _, err := ParseSourceConfig(cfg); err != nil {
				return []connector.Problem{{Msg: err.Error()}}
			}
			return nil
		},
	})
	connector.Register(connector.Spec{
		Name: "kafka-sink",
		Kind: connector.Sink,
		Doc: "Writes Kafka, exactly once by default: each subtask writes a checkpoint's records in one transaction, " +
			"committed when the checkpoint completes (two-phase commit); a restore commits what its checkpoint " +
			"pre-committed and aborts what failed runs left open.",
		Keys: append([]connector.Key{
			{Name: "topic", Type: "string", Required: true, Doc: "The topic written."},
			{Name: "topic-header", Type: "header name", Doc: "A record carrying this header goes to the topic it names (the header is not written)."},
			{Name: "tombstones", Type: "bool", Default: "false", Doc: "A record with an empty value is written with a null value: a tombstone, deleting its key from a compacted topic (an upsert SQL sink sets it)."},
			{Name: "delivery", Type: "`exactly-once`, `at-least-once`, `none`", Default: "exactly-once", Doc: "What the sink promises."},
			{Name: "transactional-id-prefix", Type: "string", Doc: "Required for exactly-once; one running job at a time may use a prefix."},
			{Name: "transaction-timeout", Type: "duration", Default: "15m", Doc: "The brokers abort a transaction older than this. Must exceed the checkpoint timeout plus the restart strategy's longest delay."},
			{Name: "transaction-max-age", Type: "duration", Default: "half of transaction-timeout", Doc: "The longest the sink carries an uncommitted transaction before it fails over to its last completed checkpoint."},
		}, clientKeys...),
		Check:  checkSink,
		Claims: sinkClaims,
	})
}

// sinkClaims: an exactly-once sink's transactional-ID prefix is its
// job's alone while the job runs.
func sinkClaims(v *weirv1.JobVertex) []connector.Claim {
	c, err := ParseSinkConfig(sdk.Config(v.GetConfig().AsMap()))
	if err != nil || c.Delivery != ExactlyOnce {
		return nil
	}
	return []connector.Claim{{
		Kind: "transactional-id-prefix", Value: c.TransactionalID,
		Why: "two jobs sharing one abort each other's transactions",
	}}
}

// checkSink refuses a kafka-sink that could lose records to a broker's
// transaction timeout. The broker aborts a transaction older than
// transaction-timeout (Flink users lose data to this). A transaction is
// committed by the checkpoint that completes after its pre-commit, so it
// must outlive the checkpoint timeout plus the restart delay; and since
// the sink carries a transaction over aborted checkpoints for at most
// transaction-max-age before it fails over, the restore that commits it
// then must fit in what is left: max-age + the longest restart delay + a
// restore allowance ≤ transaction-timeout.
func checkSink(g *weirv1.JobGraph, v *weirv1.JobVertex) []connector.Problem {
	cfg := sdk.Config(v.GetConfig().AsMap())
	if _, err := ParseClient(cfg); err != nil {
		return []connector.Problem{{Msg: err.Error()}}
	}
	c, err := ParseSinkConfig(cfg)
	if err != nil {
		return []connector.Problem{{Msg: err.Error()}}
	}
	if c.Delivery != ExactlyOnce {
		return nil
	}
	ps := checkCommitInterval(g.GetCheckpointing(), c.TransactionMaxAge)
	ckTimeout := g.GetCheckpointing().GetTimeout().AsDuration()
	delay := worstRestartDelay(g.GetRestartStrategy())
	if need := ckTimeout + delay; c.TransactionTimeout < need {
		ps = append(ps, connector.Problem{Path: "transaction-timeout", Msg: fmt.Sprintf("%s is shorter than the checkpoint timeout (%s) plus the restart strategy's longest delay (%s) = %s: a transaction pre-committed at a checkpoint could be aborted by the broker before the restarted job commits it, and its records lost",
			jobgraph.FormatDuration(c.TransactionTimeout), jobgraph.FormatDuration(ckTimeout), jobgraph.FormatDuration(delay), jobgraph.FormatDuration(need))})
	} else if need := c.TransactionMaxAge + delay + RestoreAllowance; c.TransactionTimeout < need {
		ps = append(ps, connector.Problem{Path: "transaction-max-age", Msg: fmt.Sprintf("%s plus the restart strategy's longest delay (%s) and the restore allowance (%s) = %s exceeds transaction-timeout (%s): a transaction the sink carried that long could be aborted by the broker before the restored job commits it, and its records lost",
			jobgraph.FormatDuration(c.TransactionMaxAge), jobgraph.FormatDuration(delay), jobgraph.FormatDuration(RestoreAllowance), jobgraph.FormatDuration(need), jobgraph.FormatDuration(c.TransactionTimeout))})
	}
	return ps
}

// checkCommitInterval refuses checkpointing under which an exactly-once
// Kafka sink's transactions expire in a healthy job. A transaction opens
// with the first record after a checkpoint and commits when the next one
// completes, so it lives at least one interval; at or beyond
// transaction-max-age the sink fails its subtask on every cycle, and the
// restored job is in the same place. Checkpoints switched off (interval
// 0, during a backlog too) would never commit at all.
func checkCommitInterval(cp *weirv1.CheckpointConfig, maxAge time.Duration) []connector.Problem {
	var ps []connector.Problem
	check := func(path string, interval time.Duration) {
		switch {
		case interval <= 0:
			ps = append(ps, connector.Problem{Path: path, Global: true, Msg: fmt.Sprintf("is 0 (no periodic checkpoints), but an exactly-once kafka-sink commits its transactions only when a checkpoint completes: they would expire (transaction-max-age %s) and the job fail over again and again", jobgraph.FormatDuration(maxAge))})
		case interval >= maxAge:
			ps = append(ps, connector.Problem{Path: path, Global: true, Msg: fmt.Sprintf("%s is not shorter than the exactly-once kafka-sink's transaction-max-age (%s): a transaction lives at least one interval before its checkpoint commits it, so every one would expire and the job fail over again and again", jobgraph.FormatDuration(interval), jobgraph.FormatDuration(maxAge))})
		}
	}
	check("checkpointing.interval", cp.GetInterval().AsDuration())
	if b := cp.GetIntervalDuringBacklog(); b != nil {
		check("checkpointing.interval-during-backlog", b.AsDuration())
	}
	return ps
}

// worstRestartDelay is the longest a restart strategy waits before a
// restart.
func worstRestartDelay(r *weirv1.RestartStrategy) time.Duration {
	switch r.GetKind() {
	case weirv1.RestartStrategy_KIND_FIXED_DELAY:
		return r.GetDelay().AsDuration()
	case weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY:
		return r.GetMaxBackoff().AsDuration()
	}
	return 0
}
