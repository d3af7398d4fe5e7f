package suite

import (
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/operators"
	"github.com/weirproject/weir/sdk"
)

// TestW1Specs checks that every job of W1 is a valid job spec.
func TestW1Specs(t *testing.T) {
	for _, backend := range w1Backends {
		for _, j := range w1Jobs {
			spec := w1Spec(backend, j)
			if _, err := jobgraph.ParseSpec([]byte(spec)); err != nil {
				t.Errorf("%s on %s: %v\n%s", j.key, backend, err, spec)
			}
			if !strings.Contains(spec, "backend: "+backend) {
				t.Errorf("%s on %s: no state backend in\n%s", j.key, backend, spec)
			}
		}
	}
}

// TestW1Sessions checks what w1.go says of the session job's stream: with
// sequence-source's timestamps (step 1 ms, jitter 101 ms) a key's records
// come at most 1100 ms apart (they merge) except about once in 25.5 (the
// session closes).
func TestW1Sessions(t *testing.T) {
	j := w1Jobs[3]
	if j.key != "session" || j.jitter != "101ms" || !strings.Contains(j.config, "gap: 1100ms") {
		t.Fatalf("session job changed: %+v", j)
	}
	step, period, _, err := operators.SequenceEventTime(sdk.Config{"event-time": map[string]any{"step": "1ms", "jitter": j.jitter}})
	if err != nil {
		t.Fatal(err)
	}
	gap := (1100 * time.Millisecond).Milliseconds()
	ts := func(i int64) int64 { return i*step - (i%period)*step }
	const n = 1 << 20
	last := map[int64]int64{}
	var merges, closes int
	for i := int64(0); i < n; i++ {
		k := i % w1Keys
		t0, ok := last[k]
		last[k] = ts(i)
		if !ok {
			continue
		}
		switch d := ts(i) - t0; {
		case d <= gap:
			merges++
		default:
			closes++
		}
	}
	perSession := float64(merges+closes) / float64(closes)
	if perSession < 20 || perSession > 30 {
		t.Fatalf("%d merges, %d closures: %.1f records per session, want about 25.5", merges, closes, perSession)
	}
}
