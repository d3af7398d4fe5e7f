package attempts

// Scenario tests: each file under testdata/ drives a Table. Commands
// (attempts are vertex/index#attempt):
//
//	deploy A [A...]     Deploy (a chain when several)
//	started A [A...]    Started
//	cancel A            Cancel
//	ended A [A...]      Ended
//	advance D           move the clock
//	table               the attempts held and the tombstones
//
// After every command the harness checks that no attempt is both held
// and tombstoned, and that Live lists exactly the attempts held.
//
//	go test ./internal/attempts -run TestScenarios -rewrite

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		tab, now := New(), time.Unix(0, 0)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var as []*weirv1.ExecutionAttemptID
			for _, a := range td.CmdArgs {
				if td.Cmd != "advance" {
					as = append(as, parse(t, a.Key))
				}
			}
			var out string
			switch td.Cmd {
			case "deploy":
				out = "ok"
				if err := tab.Deploy(as, now); err != nil {
					out = "error: " + err.Error()
				}
			case "started":
				out = fmt.Sprint("start=", tab.Started(as))
			case "cancel":
				out = [...]string{"unknown", "while-deploying", "stop"}[tab.Cancel(as[0], now)]
			case "ended":
				tab.Ended(as)
				out = "ok"
			case "advance":
				d, err := time.ParseDuration(td.CmdArgs[0].Key)
				if err != nil {
					t.Fatal(err)
				}
				now = now.Add(d)
				tab.expire(now)
				out = "ok"
			case "table":
				var b strings.Builder
				for _, a := range tab.Live() {
					fmt.Fprintf(&b, "%s %s\n", a.Key(), tab.State(a))
				}
				fmt.Fprintf(&b, "tombstones: %d", tab.Tombstones())
				out = b.String()
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			invariants(t, tab)
			return out + "\n"
		})
	})
}

func invariants(t *testing.T, tab *Table) {
	t.Helper()
	for k := range tab.live {
		if _, ok := tab.dead[k]; ok {
			t.Fatalf("%s is held and tombstoned", k)
		}
	}
	if len(tab.Live()) != len(tab.live) || len(tab.order) != len(tab.dead) {
		t.Fatalf("Live or the tombstone order disagrees with the table")
	}
}

func parse(t *testing.T, s string) *weirv1.ExecutionAttemptID {
	v, rest, ok1 := strings.Cut(s, "/")
	i, n, ok2 := strings.Cut(rest, "#")
	idx, err1 := strconv.Atoi(i)
	att, err2 := strconv.Atoi(n)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Fatalf("bad attempt %q (want vertex/index#attempt)", s)
	}
	return &weirv1.ExecutionAttemptID{JobId: "j", Vertex: v, SubtaskIndex: int32(idx), Attempt: int32(att), Session: "s"}
}

func TestTombstonesBounded(t *testing.T) {
	tab, now := New(), time.Unix(0, 0)
	for i := range MaxTombstones + 10 {
		tab.Cancel(&weirv1.ExecutionAttemptID{Vertex: "v", Attempt: int32(i)}, now)
	}
	if got := tab.Tombstones(); got != MaxTombstones {
		t.Fatalf("tombstones = %d, want %d", got, MaxTombstones)
	}
	// The oldest went first: the newest still refuses its deploy.
	if err := tab.Deploy([]*weirv1.ExecutionAttemptID{{Vertex: "v", Attempt: MaxTombstones + 9}}, now); err == nil {
		t.Fatal("the newest tombstone was dropped")
	}
	if err := tab.Deploy([]*weirv1.ExecutionAttemptID{{Vertex: "v", Attempt: 0}}, now); err != nil {
		t.Fatalf("the oldest tombstone was kept: %v", err)
	}
}
