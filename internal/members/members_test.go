package members

// Scenario tests: each file under testdata/ drives a Registry. Commands:
//
//	register ID REG slots=N   Register (prints the registration replaced)
//	heartbeat ID REG          Heartbeat
//	advance D                 move the clock
//	expire timeout=D          Expire
//	remove ID REG             Remove
//	free [used=ID:N,...]      FreeSlots
//	list                      the members
//
// After every command the harness checks that members are listed by ID
// once each, and that no free slot names an unconfirmed member or more
// slots than a member has.
//
//	go test ./internal/members -run TestScenarios -rewrite

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		r, now := New[struct{}](), time.Unix(0, 0)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			arg := func(i int) string {
				if len(td.CmdArgs) <= i {
					t.Fatalf("%s: %s needs %d arguments", td.Pos, td.Cmd, i+1)
				}
				return td.CmdArgs[i].Key
			}
			var out string
			switch td.Cmd {
			case "register":
				var slots int
				td.ScanArgs(t, "slots", &slots)
				out = "ok"
				if old := r.Register(arg(0), arg(1), slots, struct{}{}, now); old != nil {
					out = "replaced " + old.Registration
				}
			case "heartbeat":
				m, confirmed := r.Heartbeat(arg(0), arg(1), now)
				switch {
				case m == nil:
					out = "register again"
				case confirmed:
					out = "confirmed"
				default:
					out = "ok"
				}
			case "advance":
				d, err := time.ParseDuration(arg(0))
				if err != nil {
					t.Fatal(err)
				}
				now = now.Add(d)
				out = "ok"
			case "expire":
				var s string
				td.ScanArgs(t, "timeout", &s)
				timeout, err := time.ParseDuration(s)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, m := range r.Expire(now, timeout) {
					ids = append(ids, m.ID)
				}
				out = fmt.Sprintf("lost: %v", ids)
			case "remove":
				out = "gone already"
				if m := r.Remove(arg(0), arg(1)); m != nil {
					out = "removed " + m.ID
				}
			case "free":
				used := map[string]int{}
				if td.HasArg("used") {
					var s string
					td.ScanArgs(t, "used", &s)
					for _, kv := range strings.Split(s, ",") {
						id, n, _ := strings.Cut(kv, ":")
						k, err := strconv.Atoi(n)
						if err != nil {
							t.Fatal(err)
						}
						used[id] = k
					}
				}
				free := r.FreeSlots(used)
				checkFree(t, r, used, free)
				out = fmt.Sprintf("free: %v", free)
			case "list":
				var b strings.Builder
				for _, m := range r.All() {
					fmt.Fprintf(&b, "%s %s slots=%d confirmed=%t last=%s\n", m.ID, m.Registration, m.Slots, m.Confirmed, m.LastHeartbeat.Sub(time.Unix(0, 0)))
				}
				out = strings.TrimSuffix(b.String(), "\n")
				if out == "" {
					out = "none"
				}
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			if all := r.All(); len(all) != r.Len() {
				t.Fatalf("%s: All lists %d members, Len says %d", td.Pos, len(all), r.Len())
			}
			return out + "\n"
		})
	})
}

func checkFree(t *testing.T, r *Registry[struct{}], used map[string]int, free []string) {
	t.Helper()
	n := map[string]int{}
	for _, id := range free {
		n[id]++
	}
	for id, k := range n {
		m := r.Get(id)
		if m == nil || !m.Confirmed {
			t.Fatalf("free slot on %s, which is not a confirmed member", id)
		}
		if k+used[id] > m.Slots {
			t.Fatalf("%d free slots on %s, which has %d with %d used", k, id, m.Slots, used[id])
		}
	}
}
