package kafkacfg

import (
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/jobgraph"
)

// The kafka connectors' checks, as the job graph's validation runs them
// through the registry: a spec refused names the vertex and the key.

func TestValidateKafkaSource(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      string // empty: valid
	}{
		{"valid", "{bootstrap-servers: 'k:9092', topics: [a, b], starting-offsets: 'timestamp:1700000000000', bounded: latest}", ""},
		{"no topic", "{bootstrap-servers: 'k:9092'}", `one of "topic", "topics" or "topic-pattern" is required`},
		{"bad pattern", "{bootstrap-servers: 'k:9092', topic-pattern: '('}", `config "topic-pattern"`},
		{"committed without group", "{bootstrap-servers: 'k:9092', topic: t, starting-offsets: committed}", `committed needs "group-id"`},
		{"bad isolation", "{bootstrap-servers: 'k:9092', topic: t, isolation: dirty}", `config "isolation"`},
		{"tls cert without key", "{bootstrap-servers: 'k:9092', topic: t, tls: {cert: c.pem}}", `give both "cert" and "key"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := "name: k\nvertices:\n  - {name: src, operator: kafka-source, config: " + tt.src + "}\n" +
				"  - {name: out, operator: file-sink, inputs: [{from: src}], config: {path: /tmp/x}}\n"
			_, err := jobgraph.ParseSpec([]byte(spec))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "vertices[0].config") {
				t.Fatalf("ParseSpec = %v, want %q at vertices[0].config", err, tt.want)
			}
		})
	}
}

func TestValidateKafkaSink(t *testing.T) {
	spec := func(sink string) string {
		return "name: k\ncheckpointing: {interval: 1s, timeout: 2m}\nrestart-strategy: {type: fixed-delay, attempts: 3, delay: 30s}\nvertices:\n" +
			"  - {name: src, operator: sequence-source}\n" +
			"  - {name: out, operator: kafka-sink, inputs: [{from: src}], config: " + sink + "}\n"
	}
	for _, tt := range []struct {
		name, sink string
		want       string // empty: valid
	}{
		{"exactly once", "{bootstrap-servers: 'k:9092', topic: t, transactional-id-prefix: job}", ""},
		{"at least once needs no prefix", "{bootstrap-servers: 'k:9092', topic: t, delivery: at-least-once}", ""},
		{"no prefix", "{bootstrap-servers: 'k:9092', topic: t}", `vertices[1].config: config "transactional-id-prefix": required for delivery exactly-once`},
		{"no topic", "{bootstrap-servers: 'k:9092'}", `config "topic": required`},
		{"no servers", "{topic: t, transactional-id-prefix: job}", `config "bootstrap-servers": required`},
		{"bad sasl", "{bootstrap-servers: 'k:9092', topic: t, transactional-id-prefix: job, sasl: {mechanism: GSSAPI}}", `unknown mechanism "GSSAPI"`},
		{"short transaction timeout", "{bootstrap-servers: 'k:9092', topic: t, transactional-id-prefix: job, transaction-timeout: 1m}",
			`vertices[1].config.transaction-timeout: 1m is shorter than the checkpoint timeout (2m) plus the restart strategy's longest delay (30s) = 2m30s`},
		{"max age leaves no time to restore", "{bootstrap-servers: 'k:9092', topic: t, transactional-id-prefix: job, transaction-max-age: 14m30s}",
			`vertices[1].config.transaction-max-age: 14m30s plus the restart strategy's longest delay (30s) and the restore allowance (10s) = 15m10s exceeds transaction-timeout (15m)`},
		{"max age not below the timeout", "{bootstrap-servers: 'k:9092', topic: t, transactional-id-prefix: job, transaction-timeout: 5m, transaction-max-age: 5m}",
			`config "transaction-max-age": must be positive and below transaction-timeout (5m0s), got 5m0s`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jobgraph.ParseSpec([]byte(spec(tt.sink)))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseSpec = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestKafkaCommitInterval: an exactly-once kafka-sink fails its subtask
// once an uncommitted transaction is older than transaction-max-age, and a
// transaction lives at least one checkpoint interval. Checkpointing under
// which every transaction of a healthy job would expire is refused (the
// defaults here: transaction-timeout 15m, transaction-max-age 7m30s).
func TestKafkaCommitInterval(t *testing.T) {
	for _, tc := range []struct {
		checkpointing string
		refused       string // the problem's path; "" when accepted
	}{
		{"{interval: 10m, timeout: 2m}", "checkpointing.interval"},
		{"{interval: 7m30s, timeout: 2m}", "checkpointing.interval"},
		{"{interval: 1s, interval-during-backlog: 10m, timeout: 2m}", "checkpointing.interval-during-backlog"},
		// No checkpoints while a source reports a backlog: a backlog longer
		// than max-age fails the job over into the same backlog.
		{"{interval: 1s, interval-during-backlog: 0s, timeout: 2m}", "checkpointing.interval-during-backlog"},
		// Periodic checkpoints off: no transaction is ever committed.
		{"{interval: 0s, timeout: 2m}", "checkpointing.interval"},
		{"{interval: 7m, timeout: 2m}", ""},
		{"{interval: 1s, interval-during-backlog: 1m, timeout: 2m}", ""},
	} {
		spec := "name: k\ncheckpointing: " + tc.checkpointing + "\nrestart-strategy: {type: fixed-delay, attempts: 3, delay: 30s}\nvertices:\n" +
			"  - {name: src, operator: sequence-source}\n" +
			"  - {name: out, operator: kafka-sink, inputs: [{from: src}], config: {bootstrap-servers: 'k:9092', topic: t, transactional-id-prefix: job}}\n"
		_, err := jobgraph.ParseSpec([]byte(spec))
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("checkpointing %s: %v, want it accepted", tc.checkpointing, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused+":")):
			t.Errorf("checkpointing %s: %v, want %s refused", tc.checkpointing, err, tc.refused)
		}
	}
	// At-least-once commits nothing: no such rule.
	spec := "name: k\ncheckpointing: {interval: 0s}\nvertices:\n" +
		"  - {name: src, operator: sequence-source}\n" +
		"  - {name: out, operator: kafka-sink, inputs: [{from: src}], config: {bootstrap-servers: 'k:9092', topic: t, delivery: at-least-once}}\n"
	if _, err := jobgraph.ParseSpec([]byte(spec)); err != nil {
		t.Errorf("at-least-once sink without checkpoints: %v", err)
	}
}
