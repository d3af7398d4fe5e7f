package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStateTTLFlat: a keyed sum over a key space that never repeats keeps
// a sum per key forever; with state-ttl its state stays flat, on the heap
// and on Pebble (incremental, so the checkpointed size is the bytes of the
// store's files: what is on local disk). Four jobs run side by side for
// WEIR_STATE_TTL_SOAK (20s by default; `make soak-state-ttl` runs minutes)
// and the sum's state size is sampled at each checkpoint: the jobs without
// TTL must grow, those with it must not.
func TestStateTTLFlat(t *testing.T) {
	t.Parallel()
	soak := soakDuration(t, "WEIR_STATE_TTL_SOAK", 20*time.Second)
	c := startCluster(t, 2) // a slot per job
	ids := map[string]string{}
	for _, backend := range []string{"heap", "pebble"} {
		for _, ttl := range []string{"0s", "2s"} {
			name := fmt.Sprintf("%s-ttl-%s", backend, ttl)
			state := "{backend: heap}"
			if backend == "pebble" {
				state = "{backend: pebble, incremental: true}"
			}
			spec := filepath.Join(c.dir, name+".yaml")
			// Key i once, at 1000 records/s: every record a new key.
			err := os.WriteFile(spec, []byte(fmt.Sprintf(`name: %s
checkpointing: {interval: 1s, timeout: 1m}
state: %s
vertices:
  - {name: source, operator: sequence-source, parallelism: 1, config: {count: 0, keys: 1000000000000, rate: 1000}}
  - {name: sum, operator: keyed-sum, parallelism: 1, inputs: [{from: source, partition: hash}], config: {state-ttl: %s}}
  - {name: sink, operator: blackhole, parallelism: 1, inputs: [{from: sum, partition: forward}]}
`, name, state, ttl)), 0o644)
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = c.submit(spec)
		}
	}
	samples := c.sampleStateSizes(ids, "sum", soak)
	for _, id := range ids {
		if _, err := c.weir("job", "cancel", id); err != nil {
			t.Logf("cancel %s: %v", id, err)
		}
	}
	for _, backend := range []string{"heap", "pebble"} {
		g, f := samples[backend+"-ttl-0s"], samples[backend+"-ttl-2s"]
		t.Logf("%s: the sum's state without TTL: %v", backend, g)
		t.Logf("%s: the sum's state with a TTL of 2s: %v", backend, f)
		checkGrows(t, backend+": the sum without TTL", g, soak)
		checkFlat(t, backend+": the sum with a TTL", f)
	}
}
