package timer

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// backendKind is a state backend every scenario runs on. The scenarios'
// output does not depend on it.
type backendKind struct {
	name        string
	kind        weirv1.StateBackendConfig_Backend
	incremental bool
}

var kinds = []backendKind{
	{"heap", weirv1.StateBackendConfig_BACKEND_HEAP, false},
	// Checkpoints in the canonical format, as savepoints always are.
	{"pebble", weirv1.StateBackendConfig_BACKEND_PEBBLE, false},
	// Native checkpoints: the store's SST files.
	{"pebble-incremental", weirv1.StateBackendConfig_BACKEND_PEBBLE, true},
}

// TestScenarios runs the scenarios in testdata against real state
// backends of every kind: one timer service per subtask of a keyed
// operator, each on its own backend owning its key groups, and real
// checkpoints and savepoints written to disk and restored, at the same or
// another parallelism. After every command the harness checks the
// invariants (see check). Commands:
//
//	new [parallelism=<n>] [maxp=<max parallelism>]
//	    fresh subtasks without timers; prints the key groups each owns
//	register [domain=event|proc] timers=(<key>[:<ns>]@<ts>, ...)
//	    each timer is registered by the subtask owning its key, with the
//	    key current (as while processing a record of it)
//	delete [domain=event|proc] timers=(...)
//	next
//	    the earliest pending timestamp of each domain, per subtask
//	pop [domain=event|proc] upto=<ts>|max [sub=<i>] [limit=<n>] [reregister=<delta>]
//	    each subtask (or only sub) pops its due timers in order, as the
//	    runtime fires them; reregister: the "OnTimer" of each fired timer
//	    registers the same timer delta later, with the key Pop left current
//	timers
//	    the pending timers of each subtask, in firing order
//	snapshot name=<n> [savepoint]
//	    a checkpoint (or savepoint) of every subtask, written to disk
//	restore name=<n> [parallelism=<p>] [early]
//	    new subtasks restored from snapshot n; early: the service is
//	    made before the backend restores (it must not matter). Checks the
//	    restored timers are exactly those of the snapshot, each in the
//	    subtask owning its key's group.
func TestScenarios(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
				h := &harness{t: t, kind: k, root: t.TempDir(), snaps: map[string]snap{}}
				datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
					h.t = t
					out := h.run(td)
					h.check(td)
					return out
				})
			})
		})
	}
}

type subtask struct {
	b state.Backend
	s *Service
	r keygroup.Range
}

type snap struct {
	states []*weirv1.SubtaskState
	timers []string // every pending timer when it was taken, rendered
}

type harness struct {
	t      *testing.T
	kind   backendKind
	root   string
	maxP   int
	subs   []*subtask
	snaps  map[string]snap
	nextID int64
}

const ownerState = "owner"

func (h *harness) newBackend(parallelism, i int) state.Backend {
	b, err := state.New(state.Config{
		Kind: h.kind.kind, Incremental: h.kind.incremental, MaxParallelism: h.maxP,
		KeyGroups: keygroup.RangeFor(h.maxP, parallelism, i),
		LocalDir:  h.t.TempDir(), SharedDir: filepath.Join(h.root, "shared"),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	t := h.t
	t.Cleanup(func() { b.Close() })
	return b
}

func (h *harness) closeAll() {
	for _, s := range h.subs {
		if err := s.b.Close(); err != nil {
			h.t.Fatal(err)
		}
	}
	h.subs = nil
}

func (h *harness) run(td *datadriven.TestData) string {
	if td.Cmd != "new" && h.subs == nil {
		td.Fatalf(h.t, "new must come first")
	}
	var out strings.Builder
	switch td.Cmd {
	case "new":
		h.closeAll()
		h.maxP = intArg(h.t, td, "maxp", 16)
		p := intArg(h.t, td, "parallelism", 1)
		for i := 0; i < p; i++ {
			b := h.newBackend(p, i)
			h.subs = append(h.subs, &subtask{b: b, s: New(b), r: keygroup.RangeFor(h.maxP, p, i)})
		}
		for i, s := range h.subs {
			fmt.Fprintf(&out, "s%d owns key groups %d-%d\n", i, s.r.Start, s.r.End)
		}

	case "register", "delete":
		d := domainArg(h.t, td)
		for _, spec := range listArg(td, "timers") {
			tm := parseTimer(h.t, td, d, spec)
			i := h.owner(tm.Key)
			sub := h.subs[i]
			sub.b.SetCurrentKey(tm.Key)
			var res string
			if td.Cmd == "register" {
				// The key's state says who it is: Pop must make it current.
				sub.b.ValueState(ownerState).Update(tm.Key)
				res = "duplicate"
				if sub.s.Register(d, tm.Key, tm.Namespace, tm.Timestamp) {
					res = "added"
				}
			} else {
				res = "absent"
				if sub.s.Delete(d, tm.Key, tm.Namespace, tm.Timestamp) {
					res = "deleted"
				}
			}
			fmt.Fprintf(&out, "s%d %s: %s\n", i, render(tm), res)
		}

	case "next":
		for i, s := range h.subs {
			fmt.Fprintf(&out, "s%d:", i)
			for _, d := range []Domain{EventTime, ProcessingTime} {
				if ts, ok := s.s.Next(d); ok {
					fmt.Fprintf(&out, " %s=%d", domainName(d), ts)
				} else {
					fmt.Fprintf(&out, " %s=none", domainName(d))
				}
			}
			out.WriteString("\n")
		}

	case "pop":
		d := domainArg(h.t, td)
		upTo := int64(math.MaxInt64)
		if v := strArg(td, "upto", ""); v == "" {
			td.Fatalf(h.t, "pop needs upto")
		} else if v != "max" {
			upTo = parseInt(h.t, td, v)
		}
		only := intArg(h.t, td, "sub", -1)
		limit := intArg(h.t, td, "limit", math.MaxInt)
		var delta int64
		reregister := td.HasArg("reregister")
		if reregister {
			delta = int64(intArg(h.t, td, "reregister", 0))
		}
		for i, s := range h.subs {
			if only >= 0 && i != only {
				continue
			}
			fired := 0
			for fired < limit {
				// Whatever key was current, Pop makes the timer's current.
				s.b.SetCurrentKey([]byte("~unrelated"))
				tm, ok := s.s.Pop(d, upTo)
				if !ok {
					break
				}
				fired++
				if tm.Domain != d || tm.Timestamp > upTo {
					td.Fatalf(h.t, "popped %s with domain %s up to %d", render(tm), d, upTo)
				}
				if owner, _ := s.b.ValueState(ownerState).Value(); !bytes.Equal(owner, tm.Key) {
					td.Fatalf(h.t, "popped %s with the current key's owner state %q", render(tm), owner)
				}
				fmt.Fprintf(&out, "s%d fired %s\n", i, render(tm))
				if reregister {
					again := Timer{Domain: d, Key: tm.Key, Namespace: tm.Namespace, Timestamp: tm.Timestamp + delta}
					res := "duplicate"
					if s.s.Register(d, tm.Key, tm.Namespace, again.Timestamp) {
						res = "added"
					}
					fmt.Fprintf(&out, "  register %s: %s\n", render(again), res)
				}
			}
			if fired == 0 {
				fmt.Fprintf(&out, "s%d: none due\n", i)
			}
		}

	case "timers":
		h.dump(&out)

	case "snapshot":
		name := strArg(td, "name", "")
		savepoint := td.HasArg("savepoint")
		dir := filepath.Join(h.root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			h.t.Fatal(err)
		}
		h.nextID++
		var states []*weirv1.SubtaskState
		for i, s := range h.subs {
			sn, err := s.b.TakeSnapshot(state.SnapshotOptions{CheckpointID: h.nextID, Canonical: savepoint})
			if err != nil {
				h.t.Fatal(err)
			}
			st, err := sn.Write(dir, "timers", i, len(h.subs))
			if err != nil {
				h.t.Fatal(err)
			}
			if savepoint || !h.kind.incremental {
				if st.GetKeyedState() == nil && h.all() != nil {
					h.t.Fatalf("snapshot %s of s%d has no keyed state", name, i)
				}
			} else if len(st.GetSharedFiles()) == 0 {
				h.t.Fatalf("native snapshot %s of s%d has no files", name, i)
			}
			states = append(states, st)
		}
		for _, s := range h.subs {
			s.b.NotifyCheckpointComplete(h.nextID)
		}
		h.snaps[name] = snap{states: states, timers: h.all()}
		fmt.Fprintf(&out, "%s: %d timers of %d subtasks\n", name, len(h.snaps[name].timers), len(h.subs))

	case "restore":
		name := strArg(td, "name", "")
		sn, ok := h.snaps[name]
		if !ok {
			td.Fatalf(h.t, "no snapshot %s", name)
		}
		p := intArg(h.t, td, "parallelism", len(sn.states))
		early := td.HasArg("early")
		h.closeAll()
		for i := 0; i < p; i++ {
			b := h.newBackend(p, i)
			var s *Service
			if early {
				s = New(b)
			}
			if err := b.Restore(sn.states, i, p); err != nil {
				h.t.Fatal(err)
			}
			if !early {
				s = New(b)
			}
			b.SetCurrentKey([]byte("~current"))
			if err := s.Restore(); err != nil {
				h.t.Fatal(err)
			}
			h.subs = append(h.subs, &subtask{b: b, s: s, r: keygroup.RangeFor(h.maxP, p, i)})
		}
		got := h.all()
		if !slices.Equal(got, sn.timers) {
			td.Fatalf(h.t, "restored timers %v\nsnapshot had %v", got, sn.timers)
		}
		for i, s := range h.subs {
			fmt.Fprintf(&out, "s%d owns key groups %d-%d\n", i, s.r.Start, s.r.End)
		}
		fmt.Fprintf(&out, "restored the %d timers of %s\n", len(got), name)
		h.dump(&out)

	default:
		td.Fatalf(h.t, "unknown command %s", td.Cmd)
	}
	return out.String()
}

// owner is the subtask owning key's key group.
func (h *harness) owner(key []byte) int {
	return keygroup.OperatorIndex(keygroup.Of(key, h.maxP), h.maxP, len(h.subs))
}

// pending lists a service's timers in firing order, by domain.
func pending(s *Service) []Timer {
	var out []Timer
	for d := range s.queues {
		q := slices.Clone(s.queues[d])
		slices.SortFunc(q, func(a, b *entry) int {
			if less(a, b) {
				return -1
			}
			if less(b, a) {
				return 1
			}
			return 0
		})
		for _, e := range q {
			out = append(out, e.timer(Domain(d)))
		}
	}
	return out
}

func (e *entry) timer(d Domain) Timer {
	return Timer{Domain: d, Timestamp: e.ts, Key: []byte(e.key()), Namespace: []byte(e.namespace())}
}

// all renders every pending timer of every subtask, sorted.
func (h *harness) all() []string {
	var out []string
	for _, s := range h.subs {
		for _, tm := range pending(s.s) {
			out = append(out, render(tm))
		}
	}
	slices.Sort(out)
	return out
}

func (h *harness) dump(out *strings.Builder) {
	for i, s := range h.subs {
		fmt.Fprintf(out, "s%d (%d):", i, s.s.Len())
		for _, tm := range pending(s.s) {
			fmt.Fprintf(out, " %s", render(tm))
		}
		out.WriteString("\n")
	}
}

// check verifies every subtask (see verify) and that no timer is pending
// in two subtasks.
func (h *harness) check(td *datadriven.TestData) {
	seen := map[string]int{}
	for i, sub := range h.subs {
		if err := verify(sub.b, sub.s, sub.r, h.maxP); err != nil {
			td.Fatalf(h.t, "s%d: %v", i, err)
		}
		for _, tm := range pending(sub.s) {
			id := render(tm)
			if other, dup := seen[id]; dup {
				td.Fatalf(h.t, "%s pending in s%d and s%d", id, other, i)
			}
			seen[id] = i
		}
	}
}

// verify checks that the service's queues, its dedup index and the timers
// mirrored into keyed state (found by ScanMap) are the same set of timers,
// each once, in heap order, of keys in the key groups r, and that Len and
// Next agree.
func verify(k Keyed, s *Service, r keygroup.Range, maxP int) error {
	n := 0
	for d, q := range s.queues {
		for j, e := range q {
			tm := e.timer(Domain(d))
			if int(e.pos) != j {
				return fmt.Errorf("%s at %d thinks it is at %d", render(tm), j, e.pos)
			}
			if j > 0 && less(e, q[(j-1)/2]) {
				return fmt.Errorf("heap order: %s under %s", render(tm), render(q[(j-1)/2].timer(Domain(d))))
			}
			if s.index[e.id] != e {
				return fmt.Errorf("%s queued but not indexed", render(tm))
			}
			if Domain(e.userKey()[0]) != Domain(d) {
				return fmt.Errorf("%s in the %s queue", render(tm), Domain(d))
			}
			if kg := keygroup.Of(tm.Key, maxP); !r.Contains(kg) {
				return fmt.Errorf("owns %v, holds %s of key group %d", r, render(tm), kg)
			}
		}
		n += len(q)
		if ts, ok := s.Next(Domain(d)); ok != (len(q) > 0) || ok && ts != q[0].ts {
			return fmt.Errorf("Next(%s) = %d %v", Domain(d), ts, ok)
		}
	}
	if n != len(s.index) || n != s.Len() {
		return fmt.Errorf("%d queued, %d indexed, Len %d", n, len(s.index), s.Len())
	}
	mirrored := map[string]bool{}
	err := k.ScanMap(StateName, func(key, uk, value []byte) error {
		d, ts, ns, err := decodeUserKey(uk)
		if err != nil {
			return err
		}
		tm := Timer{Domain: d, Timestamp: ts, Key: key, Namespace: ns}
		if len(value) != 0 {
			return fmt.Errorf("%s mirrored with value %q", render(tm), value)
		}
		id := string(appendID(nil, d, key, ns, ts))
		if mirrored[id] {
			return fmt.Errorf("%s mirrored twice", render(tm))
		}
		mirrored[id] = true
		if _, ok := s.index[id]; !ok {
			return fmt.Errorf("%s mirrored but not pending", render(tm))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(mirrored) != s.Len() {
		return fmt.Errorf("%d timers mirrored, Len %d", len(mirrored), s.Len())
	}
	return nil
}

func domainName(d Domain) string {
	if d == EventTime {
		return "event"
	}
	return "proc"
}

func render(tm Timer) string {
	ns := ""
	if len(tm.Namespace) > 0 {
		ns = ":" + string(tm.Namespace)
	}
	return fmt.Sprintf("%s %s%s@%d", domainName(tm.Domain), tm.Key, ns, tm.Timestamp)
}

// parseTimer reads <key>[:<ns>]@<ts>.
func parseTimer(t *testing.T, td *datadriven.TestData, d Domain, spec string) Timer {
	kn, ts, ok := strings.Cut(spec, "@")
	if !ok {
		td.Fatalf(t, "timer %q: want <key>[:<ns>]@<ts>", spec)
	}
	key, ns, _ := strings.Cut(kn, ":")
	return Timer{Domain: d, Key: []byte(key), Namespace: []byte(ns), Timestamp: parseInt(t, td, ts)}
}

func domainArg(t *testing.T, td *datadriven.TestData) Domain {
	switch v := strArg(td, "domain", "event"); v {
	case "event":
		return EventTime
	case "proc":
		return ProcessingTime
	default:
		td.Fatalf(t, "domain %q", v)
	}
	return 0
}

func strArg(td *datadriven.TestData, key, def string) string {
	a, ok := td.Arg(key)
	if !ok || len(a.Vals) == 0 {
		return def
	}
	return a.Vals[0]
}

func listArg(td *datadriven.TestData, key string) []string {
	a, _ := td.Arg(key)
	var out []string
	for _, v := range a.Vals {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func intArg(t *testing.T, td *datadriven.TestData, key string, def int) int {
	v := strArg(td, key, "")
	if v == "" {
		return def
	}
	return int(parseInt(t, td, v))
}

func parseInt(t *testing.T, td *datadriven.TestData, v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		td.Fatalf(t, "%q: %v", v, err)
	}
	return n
}
