// Package opspec describes the built-in operators for internal/connector:
// their configuration keys, for the reference and the registry. It links
// none of the operators' code, so what validates jobs (the CLI, the
// JobManager) need not either.
package opspec

import (
	"github.com/weirproject/weir/internal/connector"
	"github.com/weirproject/weir/internal/sql/plan"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

func init() {
	for _, s := range []connector.Spec{
		{
			Name: "sequence-source", Kind: connector.Source,
			Doc: "Emits key `i mod keys`, value `i` for `i` in `[0, count)`, split across the subtasks; its position " +
				"is checkpointed, so a restored job resumes exactly where the checkpoint was.",
			Keys: []connector.Key{
				{Name: "count", Type: "integer", Default: "0", Doc: "How many records; 0: unbounded."},
				{Name: "keys", Type: "integer", Default: "16", Doc: "How many distinct keys."},
				{Name: "rate", Type: "records/s", Default: "0", Doc: "At most this many records per second per subtask; 0: as fast as it can."},
				{Name: "event-time", Type: "{step, jitter, start}", Doc: "Record `i` carries the timestamp `start + i*step − (i mod (jitter/step + 1))*step`: at most `jitter` behind the newest; `start` is an RFC 3339 time (default the Unix epoch). Without it, timestamps are 0."},
			},
		},
		{
			Name: "nexmark-source", Kind: connector.Source,
			Doc: "The Nexmark benchmark's event stream (people, auctions and bids, 1:3:46); event `n` is a pure function " +
				"of `n` and the configuration, and each split's position restores exactly at any parallelism. Key: the " +
				"event's kind; value: its binary encoding (or CSV); timestamp: its event time.",
			Keys: []connector.Key{
				{Name: "events", Type: "integer", Default: "0", Doc: "How many events; 0: unbounded."},
				{Name: "rate", Type: "events/s", Default: "0", Doc: "Wall-clock events per second of the whole stream; 0: as fast as it can."},
				{Name: "first-event-rate", Type: "events/s", Default: "10000", Doc: "Event time advances 1/first-event-rate per event."},
				{Name: "base-time", Type: "RFC 3339 time", Default: "2024-01-01T00:00:00Z", Doc: "The event time of event 0."},
				{Name: "splits", Type: "integer", Default: "the parallelism", Doc: "Event `n` is in split `n mod splits`."},
				{Name: "hot-auction-ratio", Type: "integer", Default: "2", Doc: "As in the Nexmark generator."},
				{Name: "hot-bidder-ratio", Type: "integer", Default: "4", Doc: "As in the Nexmark generator."},
				{Name: "hot-seller-ratio", Type: "integer", Default: "4", Doc: "As in the Nexmark generator."},
				{Name: "us-states", Type: "list of strings, or one comma-separated string", Default: "AZ, CA, ID, OR, WA, WY", Doc: "The states people live in, drawn uniformly (RisingWave's `nexmark.us.states`; its generator writes them lower-case)."},
				{Name: "kinds", Type: "list of `person`, `auction`, `bid`", Default: "all", Doc: "The kinds emitted."},
				{Name: "key", Type: "`kind`, `none`", Default: "kind", Doc: "`none`: records carry an empty key."},
				{Name: "format", Type: "`binary`, `csv`", Default: "binary", Doc: "How an event is encoded in the value."},
			},
		},
		{
			Name: "keyed-sum", Kind: connector.Transform,
			Doc: "Running sum of the decimal values per key (keyed state); emits `(key, sum)` for every input.",
			Keys: []connector.Key{
				{Name: "state-ttl", Type: "duration", Default: "0s", Doc: "A key's sum expires this long after its last update (on processing time) and the key starts again from 0; expired sums are removed from memory, disk and checkpoints. `0s`: kept forever."},
				{Name: "state-ttl-update", Type: "`write`, `read-and-write`", Default: "write", Doc: "Which accesses restart the TTL."},
			},
		},
		{
			Name: "window", Kind: connector.Transform,
			Doc: "Keyed windows over the decimal values. Each window fires once and emits key = the input key, value " +
				"`<window-start-ms>,<window-end-ms>,<result>`.",
			Keys: []connector.Key{
				{Name: "type", Type: "`tumbling`, `sliding`, `session`", Required: true, Doc: "The window assigner."},
				{Name: "size", Type: "duration", Doc: "A tumbling or sliding window's length."},
				{Name: "slide", Type: "duration", Doc: "How far apart sliding windows start."},
				{Name: "gap", Type: "duration", Doc: "The inactivity that ends a session."},
				{Name: "aggregate", Type: "`count`, `sum`, `min`, `max`, `avg`", Required: true, Doc: "What a window computes."},
				{Name: "allowed-lateness", Type: "duration", Default: "0s", Doc: "How long after its end a window still takes late records (and fires again)."},
				{Name: "time", Type: "`event`, `processing`", Default: "event", Doc: "Which clock the windows follow."},
			},
		},
		{
			Name: "interval-join", Kind: connector.Transform,
			Doc: "Two keyed inputs (left, then right): a left record `l` joins every right record `r` of its key with " +
				"`l.ts + lower ≤ r.ts ≤ l.ts + upper`, emitting `<left value>|<right value>` at `max(l.ts, r.ts)`.",
			Keys: []connector.Key{
				{Name: "lower", Type: "duration (may be negative)", Required: true, Doc: "The interval's lower bound."},
				{Name: "upper", Type: "duration (may be negative)", Required: true, Doc: "The interval's upper bound."},
			},
		},
		{
			Name: "window-join", Kind: connector.Transform,
			Doc: "Two keyed inputs joined per tumbling window: every pair of a key's records in a window, `<left value>|<right value>`, when the window fires.",
			Keys: []connector.Key{
				{Name: "size", Type: "duration", Required: true, Doc: "The tumbling window's length."},
			},
		},
		{
			Name: "file-sink", Kind: connector.Sink,
			Doc: "Writes part files with two-phase commit: a checkpoint's snapshot pre-commits the files closed since " +
				"the last one and its completion makes them visible (`part-*`); one `<key>,<value>` line per record (or " +
				"its value alone). " +
				"In a directory, or in S3 as multipart uploads.",
			Keys: []connector.Key{
				{Name: "path", Type: "directory or `s3://bucket/prefix`", Required: true, Doc: "Where the part files go; give every job its own."},
				{Name: "roll", Type: "{on-checkpoint, max-size, max-age}", Default: "on-checkpoint: true", Doc: "When a part file is closed: at every checkpoint, once it holds `max-size` bytes, or `max-age` after it opened (without `on-checkpoint`, 128MiB and 60s by default)."},
				{Name: "line", Type: "`key-value`, `value`", Default: "key-value", Doc: "What a line holds: `<key>,<value>`, or the value alone (a SQL sink's CSV or JSON rows)."},
			},
		},
		{
			Name: "sql-calc", Kind: connector.Transform,
			Doc: "A SQL query's filter and projection (Flink's Calc), stateless: decodes its input (a SQL operator's " +
				"rows, CSV or JSON text, or a Nexmark or sequence source's records), keeps the rows the filter is true " +
				"for, and emits the projected rows.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-calc", func(op *plan.Operator) bool { return op.Calc != nil }),
		},
		{
			Name: "sql-window-aggregate", Kind: connector.Transform,
			Doc: "A SQL query's aggregate over tumbling, hopping or session windows, per key (the group columns): " +
				"one row per key and window when the watermark (or the clock) passes the window's end.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-window-aggregate", func(op *plan.Operator) bool { return op.WindowAgg != nil }),
		},
		{
			Name: "sql-local-aggregate", Kind: connector.Transform,
			Doc: "The first phase of a two-phase SQL window aggregate: folds its subtask's rows per group and pane, " +
				"and sends each pane's partial result on when the watermark passes the pane's end.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-local-aggregate", func(op *plan.Operator) bool { return op.LocalAgg != nil }),
		},
		{
			Name: "sql-group-aggregate", Kind: connector.Transform,
			Doc: "A SQL query's unbounded GROUP BY (or DISTINCT), per key (the group columns): keeps an accumulator " +
				"per group and emits every change of a group's row as a changelog (+I, -U/+U, -D), taking back the " +
				"retractions of an updating input; optionally folds a batch's changes per group (mini-batch) and " +
				"drops groups idle for the state TTL.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-group-aggregate", func(op *plan.Operator) bool { return op.GroupAgg != nil }),
		},
		{
			Name: "sql-normalize", Kind: connector.Transform,
			Doc: "Turns an upsert source's stream (each message its key's latest row, an empty one its deletion) into " +
				"a changelog whose retractions carry the rows they take back (Flink's ChangelogNormalize), keeping the " +
				"latest row per key.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-normalize", func(op *plan.Operator) bool { return op.Normalize != nil }),
		},
		{
			Name: "sql-top-n", Kind: connector.Transform,
			Doc: "A SQL query's ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) with WHERE rn <= N, per key (the " +
				"partition columns): keeps the first N rows of each partition and emits their changes as a changelog; " +
				"N = 1 deduplicates.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-top-n", func(op *plan.Operator) bool { return op.TopN != nil }),
		},
		{
			Name: "sql-over-aggregate", Kind: connector.Transform,
			Doc: "A SQL query's aggregates OVER (PARTITION BY … ORDER BY … ROWS BETWEEN …), per key (the partition " +
				"columns): each row's aggregates over the frame of rows around it; a row added or taken back updates " +
				"the rows whose frames it enters or leaves, as a changelog.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-over-aggregate", func(op *plan.Operator) bool { return op.OverAgg != nil }),
		},
		{
			Name: "sql-join", Kind: connector.Transform,
			Doc: "A SQL query's inner equi-join of two keyed inputs (left, then right): an interval join, a join of " +
				"the same windows, or a regular join, whose state grows without bound.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-join", func(op *plan.Operator) bool { return op.Join != nil }),
		},
		{
			Name: "blackhole", Kind: connector.Sink,
			Doc: "Discards its records (SQL's `blackhole` connector); the vertex's metrics count them.",
		},
		{
			Name: "sql-collect", Kind: connector.Sink,
			Doc: "The result of a SQL query with no sink, run by `weir sql`: streams each subtask's rows (binary " +
				"rows of the result's columns) to the client at the plan's address, which prints them; once the " +
				"client has the rows it wants (a LIMIT), the rest are dropped. Best effort: a restarted subtask " +
				"sends again the rows since its checkpoint, and rows queued at a failure may be lost. A client that takes no rows for 30s fails the subtask.",
			Keys:  []connector.Key{planKey},
			Check: checkPlan("sql-collect", func(op *plan.Operator) bool { return op.Collect != nil }),
		},
	} {
		connector.Register(s)
	}
}

// planKey is the one key of the SQL operators.
var planKey = connector.Key{Name: "plan", Type: "JSON", Required: true, Doc: "The operator's part of a compiled SQL query, as `weir sql` writes it."}

// checkPlan refuses a SQL vertex whose plan does not decode, or holds the
// configuration of another operator than the vertex's.
func checkPlan(name string, ours func(*plan.Operator) bool) func(*weirv1.JobGraph, *weirv1.JobVertex) []connector.Problem {
	return func(_ *weirv1.JobGraph, v *weirv1.JobVertex) []connector.Problem {
		s, err := sdk.Config(v.GetConfig().AsMap()).String("plan", "")
		if err != nil {
			return []connector.Problem{{Path: "plan", Msg: err.Error()}}
		}
		if s == "" {
			return []connector.Problem{{Path: "plan", Msg: "required"}}
		}
		op, err := plan.Unmarshal(s)
		if err != nil {
			return []connector.Problem{{Path: "plan", Msg: err.Error()}}
		}
		if !ours(op) {
			return []connector.Problem{{Path: "plan", Msg: "not a plan of " + name + ": it configures another SQL operator"}}
		}
		return nil
	}
}
