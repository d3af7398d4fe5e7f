package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/weirproject/weir/internal/check"
	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/nexmark/queries"
)

// TestNexmarkQueries runs each Nexmark query of examples/nexmark on real
// processes (a JobManager and two of the program's TaskManagers,
// checkpoints every second), kills a TaskManager after two checkpoints,
// and checks that the committed output is exactly the oracle's: the same
// query computed in plain Go over the same events.
//
// The events' event time runs at 1,000 events/s so that the bounded run
// spans many of the queries' 10 s windows; the stream is paced at 8,000
// events/s of wall time so that the kill comes mid-run.
func TestNexmarkQueries(t *testing.T) {
	const events, firstEventRate, rate = 60_000, 1000, 8000
	cfg := nexmark.Config{FirstEventRate: firstEventRate}
	for _, q := range queries.Names {
		t.Run(q, func(t *testing.T) {
			want, err := queries.Oracle(q, cfg, events)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatalf("the oracle gives no %s rows for %d events: nothing would be checked", q, events)
			}
			out := filepath.Join(t.TempDir(), "out")
			got := runProgramWithKill(t, "example-nexmark", out, "NEXMARK_QUERY="+q, "NEXMARK_OUT="+out,
				fmt.Sprintf("NEXMARK_EVENTS=%d", events), fmt.Sprintf("NEXMARK_RATE=%d", rate),
				fmt.Sprintf("NEXMARK_FIRST_EVENT_RATE=%d", firstEventRate),
				"NEXMARK_PARALLELISM=2", "NEXMARK_CHECKPOINT_INTERVAL=1s")
			if err := check.Lines(got, want); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			t.Logf("%s: %d rows, exactly the oracle's", q, len(want))
		})
	}
}
