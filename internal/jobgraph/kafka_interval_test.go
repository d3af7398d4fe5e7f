package jobgraph

import (
	"strings"
	"testing"
)

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
		_, err := ParseSpec([]byte(spec))
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
	if _, err := ParseSpec([]byte(spec)); err != nil {
		t.Errorf("at-least-once sink without checkpoints: %v", err)
	}
}
