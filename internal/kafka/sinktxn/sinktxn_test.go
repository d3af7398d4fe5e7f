package sinktxn

// Scenario tests in the style of the checkpoint coordinator's and the
// registration's: every file under testdata/ is a script that drives one or
// more Machines (sink subtasks) step by step and records, under each
// command, what the machine answered. The files are the specification of
// the protocol in the package comment. Regenerate the expected output with
//
//	go test ./internal/kafka/sinktxn -run TestScenarios -rewrite
//
// and read every changed line against the package comment.
//
// Every machine has Names{Prefix: "job", Vertex: "sink"}, so the
// transactional ID of slot i of subtask k is job-sink-k-i. Times print
// relative to the fake clock's start, e.g. +1m30s; durations are Go
// durations.
//
// Commands:
//
//	new subtask=N parallelism=P [max-age=D] [machine=NAME]
//	    a new machine (the default NAME is "m"; a second name keeps the
//	    first machine, e.g. another attempt or another subtask); it
//	    becomes the current one, which every command below drives.
//	    Prints its state.
//	use NAME
//	    make machine NAME the current one again.
//	restore checkpoint=K [from=(NAME, ...)]
//	    Restore from the saved items NAME, ... (default: every item saved
//	    as K/<subtask>, i.e. the whole checkpoint K; none for K=0, a
//	    first start). Prints the plan: one "commit" line per transaction
//	    to commit, in order, then "fence" and the transactional IDs to
//	    initialise anew, or the error.
//	fence-open
//	ID
//	...
//	    FenceOpen of every ID of the input (the brokers' list of open
//	    transactions): prints "ID fence" or "ID keep".
//	begin
//	    Begin at the clock's now: prints the slot and its ID, or the error.
//	snapshot checkpoint=N [producer=ID|none] [epoch=E] [as=NAME]
//	    Snapshot N. When a transaction is open the producer defaults to
//	    1000*(subtask+1)+slot, epoch 0 (producer=none passes none);
//	    otherwise none is passed unless producer= is given. The item is
//	    saved as N/<subtask> (or NAME) for restores and printed decoded.
//	complete checkpoint=N [commit=all|none|first]
//	    Complete N: prints every transaction it asks to commit, and which
//	    of them the sink then reports with Committed (default all).
//	committed checkpoint=N slot=I [subtask=K]
//	    Committed for the pending transaction of checkpoint N on slot I
//	    of subtask K (default the machine's own): the sink's late report.
//	carry from=A to=B
//	    for every checkpoint A..B in turn: begin, then snapshot it; none
//	    completes. Prints the slots they took, or the first error.
//	advance D
//	    move the fake clock.
//	expired
//	    the Deadline, then Expired at now: "ok" or "expired: ...".
//	state
//	    the machine's String().
//	item name=NAME
//	uvarint N | varint N | id TEXT | raw HEX   [# comment]
//	...
//	    save hand-built bytes (id is a uvarint length and the bytes: a
//	    transactional ID as Encode writes it) under NAME, e.g. a state of
//	    an earlier version or a corrupt one, and print what Decode makes
//	    of them.
//
// After every command the harness checks, on every machine, invariants the
// protocol demands, and fails the test on any broken one: the open slot is
// neither pending nor reserved; no two pending transactions share a slot;
// pending transactions are the subtask's own, oldest first; every own slot
// that may hold a transaction is below the recorded slot count, which is at
// most MaxSlots; Deadline is zero iff nothing is open or pending (with a
// max-age; always zero without) and is the oldest begin plus max-age, and
// Expired agrees with it; Encode decodes to the same subtask, parallelism,
// slot count and pending list. The harness also keeps its own model of the
// protocol and checks the machine against it: the pending transactions and
// the open slot; the reserved slots, which must be exactly those, not
// pending, that a checkpoint this attempt recorded or restored names while
// that checkpoint may still be restored (it is the newest completed one or
// above it); Begin takes the lowest slot neither pending nor reserved;
// Complete asks for exactly the pending transactions up to the checkpoint
// (none for a checkpoint above the newest snapshot). A restore commits
// exactly what the items of the subtasks it answers for recorded, oldest
// first, never fences a slot it commits, and fences every other slot the
// items say those subtasks may have used (at least InitialSlots each, and
// the machine's own); a refused command changes nothing.
//
// Built with -tags failpoints, TestScenariosCatchBugs runs every scenario
// with each mistake of bugs.go put back and requires one to fail.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// start is where every fake clock starts; output is relative to it.
var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

var testNames = Names{Prefix: "job", Vertex: "sink"}

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	})
}

type harness struct {
	now      time.Time
	items    map[string][]byte
	machines map[string]*subject
	cur      *subject
}

func newHarness() *harness {
	return &harness{now: start, items: map[string][]byte{}, machines: map[string]*subject{}}
}

// subject is a machine under test and the harness's model of it.
type subject struct {
	name        string
	m           *Machine
	subtask     int
	parallelism int
	maxAge      time.Duration

	open    *modelOpen
	pending []modelTxn
	// named: the slots each checkpoint this attempt recorded (its pending
	// transactions) or restored (the transactions the restore commits)
	// names.
	named     map[int64][]Slot
	completed int64 // the newest completion taken
	snapshot  int64
}

type modelOpen struct {
	slot  int
	began time.Time
}

type modelTxn struct {
	t     Txn
	began time.Time
}

func (h *harness) run(t testing.TB, td *datadriven.TestData) string {
	t.Helper()
	a := &args{t: t, td: td}
	var b strings.Builder
	switch td.Cmd {
	case "new":
		name := a.str("machine", "m")
		s := &subject{
			name:        name,
			subtask:     int(a.int("subtask", -1)),
			parallelism: int(a.int("parallelism", -1)),
			maxAge:      a.dur("max-age", 0),
			named:       map[int64][]Slot{},
		}
		a.done()
		if s.subtask < 0 || s.parallelism <= 0 || s.subtask >= s.parallelism {
			t.Fatalf("%s: usage: new subtask=N parallelism=P with 0 <= N < P", td.Pos)
		}
		s.m = New(testNames, s.subtask, s.parallelism, s.maxAge)
		h.machines[name] = s
		h.cur = s
		fmt.Fprintln(&b, s.m.String())
	case "use":
		s, ok := h.machines[a.first()]
		if !ok {
			t.Fatalf("%s: no machine %q", td.Pos, a.first())
		}
		h.cur = s
		fmt.Fprintln(&b, s.m.String())
	case "restore":
		h.restore(t, td, a, &b)
	case "fence-open":
		s := h.subject(t, td)
		a.done()
		for _, id := range strings.Fields(td.Input) {
			got := s.m.FenceOpen(id)
			slot, ok := testNames.Parse(id)
			want := ok && slot.Subtask%s.parallelism == s.subtask && !s.reserved()[slot]
			if got != want {
				t.Errorf("%s: invariant: FenceOpen(%s) = %t, want %t (ours: %t, reserved: %t)", td.Pos, id, got, want, ok && slot.Subtask%s.parallelism == s.subtask, s.reserved()[slot])
			}
			if got {
				fmt.Fprintf(&b, "%s fence\n", id)
			} else {
				fmt.Fprintf(&b, "%s keep\n", id)
			}
		}
	case "begin":
		s := h.subject(t, td)
		a.done()
		h.begin(t, td, s, &b)
	case "snapshot":
		h.snapshotCmd(t, td, a, &b)
	case "complete":
		h.complete(t, td, a, &b)
	case "committed":
		s := h.subject(t, td)
		ck := a.int("checkpoint", -1)
		slot := Slot{int(a.int("subtask", int64(s.subtask))), int(a.int("slot", -1))}
		a.done()
		h.committed(t, td, s, Txn{Checkpoint: ck, Slot: slot}, &b)
		fmt.Fprintln(&b, s.m.String())
	case "carry":
		s := h.subject(t, td)
		from, to := a.int("from", -1), a.int("to", -1)
		a.done()
		if from <= 0 || to < from {
			t.Fatalf("%s: usage: carry from=A to=B with 0 < A <= B", td.Pos)
		}
		var slots []int
		for ck := from; ck <= to; ck++ {
			var step strings.Builder
			if !h.begin(t, td, s, &step) {
				fmt.Fprintf(&b, "checkpoint %d: %s", ck, step.String())
				break
			}
			slots = append(slots, s.open.slot)
			p := &Producer{ID: defaultProducer(Slot{s.subtask, s.open.slot})}
			if _, err := h.snapshot(t, td, s, ck, p); err != nil {
				fmt.Fprintf(&b, "checkpoint %d: error: %v\n", ck, err)
				break
			}
			h.items[fmt.Sprintf("%d/%d", ck, s.subtask)] = s.m.Encode()
		}
		fmt.Fprintf(&b, "pre-committed on slots %s\n", ranges(slots))
		fmt.Fprintln(&b, s.m.String())
	case "advance":
		d := a.firstDuration()
		if d < 0 {
			t.Fatalf("%s: the clock only moves forward", td.Pos)
		}
		h.now = h.now.Add(d)
		fmt.Fprintf(&b, "now %s\n", fmtTime(h.now))
	case "expired":
		s := h.subject(t, td)
		a.done()
		fmt.Fprintf(&b, "deadline %s\n", fmtTime(s.m.Deadline()))
		if err := s.m.Expired(h.now); err != nil {
			fmt.Fprintf(&b, "expired: %v\n", err)
		} else {
			b.WriteString("ok\n")
		}
	case "state":
		s := h.subject(t, td)
		a.done()
		fmt.Fprintln(&b, s.m.String())
	case "item":
		name := a.str("name", "")
		a.done()
		if name == "" {
			t.Fatalf("%s: usage: item name=NAME", td.Pos)
		}
		raw := buildBytes(t, td)
		h.items[name] = raw
		st, err := Decode(testNames, raw)
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		} else {
			fmt.Fprintf(&b, "decoded %s", fmtState(st))
		}
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	for _, name := range slices.Sorted(maps.Keys(h.machines)) {
		h.machines[name].invariants(t, td, h.now)
	}
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

func (h *harness) subject(t testing.TB, td *datadriven.TestData) *subject {
	if h.cur == nil {
		t.Fatalf("%s: no machine: use new first", td.Pos)
	}
	return h.cur
}

func (h *harness) restore(t testing.TB, td *datadriven.TestData, a *args, b *strings.Builder) {
	s := h.subject(t, td)
	ck := a.int("checkpoint", -1)
	from, explicit := a.get("from")
	a.done()
	if ck < 0 {
		t.Fatalf("%s: usage: restore checkpoint=K [from=(NAME, ...)]", td.Pos)
	}
	var itemNames []string
	if explicit {
		itemNames = strings.Split(from, ",")
	} else {
		prefix := strconv.FormatInt(ck, 10) + "/"
		for name := range h.items {
			if strings.HasPrefix(name, prefix) {
				itemNames = append(itemNames, name)
			}
		}
		slices.SortFunc(itemNames, func(x, y string) int {
			kx, _ := strconv.Atoi(strings.TrimPrefix(x, prefix))
			ky, _ := strconv.Atoi(strings.TrimPrefix(y, prefix))
			return cmp.Or(cmp.Compare(kx, ky), strings.Compare(x, y))
		})
		if ck > 0 && len(itemNames) == 0 {
			t.Fatalf("%s: no item saved for checkpoint %d", td.Pos, ck)
		}
	}
	var items [][]byte
	for _, name := range itemNames {
		name = strings.TrimSpace(name)
		it, ok := h.items[name]
		if !ok {
			t.Fatalf("%s: no item %q", td.Pos, name)
		}
		items = append(items, it)
	}
	if s.snapshot != 0 || s.open != nil || len(s.pending) > 0 || len(s.m.reserved) > 0 {
		t.Fatalf("%s: restore of a machine that already ran: restore a new one", td.Pos)
	}
	before := s.m.String()
	plan, err := s.m.Restore(ck, items)
	if err != nil {
		fmt.Fprintf(b, "error: %v\n", err)
		if after := s.m.String(); after != before {
			t.Errorf("%s: invariant: a refused restore changed the machine:\n before %s\n after  %s", td.Pos, before, after)
		}
		return
	}
	h.checkPlan(t, td, s, items, plan)
	s.snapshot, s.completed = ck, ck
	for _, c := range plan.Commit {
		s.named[ck] = append(s.named[ck], c.Slot)
	}
	for _, c := range plan.Commit {
		fmt.Fprintf(b, "commit %s\n", fmtTxn(c))
	}
	ids := []string{"fence"}
	for _, f := range plan.Fence {
		ids = append(ids, testNames.ID(f))
	}
	if len(plan.Fence) == 0 {
		ids = append(ids, "none")
	}
	fmt.Fprintln(b, strings.Join(ids, " "))
}

// checkPlan checks a restore's plan against the items it restored.
func (h *harness) checkPlan(t testing.TB, td *datadriven.TestData, s *subject, items [][]byte, plan Plan) {
	fail := func(format string, args ...any) {
		t.Errorf("%s: invariant: %s", td.Pos, fmt.Sprintf(format, args...))
	}
	ours := func(k int) bool { return k%s.parallelism == s.subtask }
	var want []Txn
	slots := map[int]int{s.subtask: 0} // subtask answered for → slots it may have used
	for _, it := range items {
		st, err := Decode(testNames, it)
		if err != nil {
			fail("restore accepted an item Decode refuses: %v", err)
			return
		}
		if !ours(st.Subtask) {
			continue
		}
		slots[st.Subtask] = max(slots[st.Subtask], st.Slots)
		want = append(want, st.Pending...)
	}
	slices.SortStableFunc(want, func(x, y Txn) int { return cmp.Compare(x.Checkpoint, y.Checkpoint) })
	if !sameTxns(plan.Commit, want) {
		fail("restore commits %v, want what the items recorded: %v", plan.Commit, want)
	}
	commit := map[Slot]bool{}
	for _, c := range plan.Commit {
		commit[c.Slot] = true
	}
	fenced := map[Slot]bool{}
	for _, f := range plan.Fence {
		if commit[f] {
			fail("restore fences %s, whose transaction it commits", testNames.ID(f))
		}
		if fenced[f] {
			fail("restore fences %s twice", testNames.ID(f))
		}
		if !ours(f.Subtask) {
			fail("restore fences %s of a subtask it does not answer for", testNames.ID(f))
		}
		fenced[f] = true
	}
	for k, n := range slots {
		for i := range max(n, InitialSlots) {
			if sl := (Slot{k, i}); !fenced[sl] && !commit[sl] {
				fail("restore neither commits nor fences %s", testNames.ID(sl))
			}
		}
	}
}

// begin drives Begin and checks its answer against the model; it reports
// whether a transaction is open.
func (h *harness) begin(t testing.TB, td *datadriven.TestData, s *subject, b *strings.Builder) bool {
	if s.open != nil {
		slot, err := s.m.Begin(h.now)
		if err != nil || slot != (Slot{s.subtask, s.open.slot}) {
			t.Errorf("%s: invariant: Begin with slot %d open: %v, %v", td.Pos, s.open.slot, slot, err)
		}
		fmt.Fprintf(b, "slot %d: %s (already open)\n", slot.Index, testNames.ID(slot))
		return true
	}
	reserved := s.reserved()
	want := -1
	for i := range MaxSlots {
		sl := Slot{s.subtask, i}
		if !reserved[sl] && !s.isPending(sl) && len(s.pending) < MaxSlots-1 {
			// With MaxSlots-1 carried, one more would let a checkpoint
			// name every slot, and a restore of it leave none free.
			want = i
			break
		}
	}
	before := s.m.String()
	slot, err := s.m.Begin(h.now)
	if err != nil {
		if want >= 0 {
			t.Errorf("%s: invariant: Begin refused (%v) while slot %d is free", td.Pos, err, want)
		}
		if after := s.m.String(); after != before {
			t.Errorf("%s: invariant: a refused Begin changed the machine:\n before %s\n after  %s", td.Pos, before, after)
		}
		fmt.Fprintf(b, "error: %v\n", err)
		return false
	}
	if slot != (Slot{s.subtask, want}) {
		t.Errorf("%s: invariant: Begin took %s, want the lowest free slot %d", td.Pos, testNames.ID(slot), want)
	}
	s.open = &modelOpen{slot: slot.Index, began: h.now}
	fmt.Fprintf(b, "slot %d: %s\n", slot.Index, testNames.ID(slot))
	return true
}

// defaultProducer is the producer ID a scenario's snapshot gives the
// transaction on s unless it names one.
func defaultProducer(s Slot) int64 { return int64(1000*(s.Subtask+1) + s.Index) }

func (h *harness) snapshotCmd(t testing.TB, td *datadriven.TestData, a *args, b *strings.Builder) {
	s := h.subject(t, td)
	ck := a.int("checkpoint", -1)
	var p *Producer
	if open, ok := s.m.Open(); ok {
		p = &Producer{ID: defaultProducer(open)}
	}
	if v, ok := a.get("producer"); ok {
		if v == "none" {
			p = nil
		} else {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: producer: %v", td.Pos, err)
			}
			p = &Producer{ID: id}
		}
	}
	if p != nil {
		p.Epoch = int16(a.int("epoch", 0))
	}
	name := a.str("as", fmt.Sprintf("%d/%d", ck, s.subtask))
	a.done()
	item, err := h.snapshot(t, td, s, ck, p)
	if err != nil {
		fmt.Fprintf(b, "error: %v\n", err)
		return
	}
	h.items[name] = item
	st, err := Decode(testNames, item)
	if err != nil {
		t.Fatalf("%s: invariant: the snapshot's item does not decode: %v", td.Pos, err)
	}
	fmt.Fprintf(b, "saved %s: %s", name, fmtState(st))
}

// snapshot drives Snapshot and the model.
func (h *harness) snapshot(t testing.TB, td *datadriven.TestData, s *subject, ck int64, p *Producer) ([]byte, error) {
	before := s.m.String()
	item, err := s.m.Snapshot(ck, p)
	wantErr := (p != nil) != (s.open != nil) || ck <= s.snapshot
	if (err != nil) != wantErr {
		t.Errorf("%s: invariant: Snapshot(%d, %v) = %v; model: open %v, newest snapshot %d", td.Pos, ck, p, err, s.open != nil, s.snapshot)
	}
	if err != nil {
		if after := s.m.String(); after != before {
			t.Errorf("%s: invariant: a refused Snapshot changed the machine:\n before %s\n after  %s", td.Pos, before, after)
		}
		return nil, err
	}
	if s.open != nil {
		s.pending = append(s.pending, modelTxn{
			t:     Txn{Checkpoint: ck, Slot: Slot{s.subtask, s.open.slot}, Producer: p.ID, Epoch: p.Epoch},
			began: s.open.began,
		})
		s.open = nil
	}
	s.snapshot = ck
	for _, pt := range s.pending {
		s.named[ck] = append(s.named[ck], pt.t.Slot)
	}
	if !bytes.Equal(item, s.m.Encode()) {
		t.Errorf("%s: invariant: Snapshot's item differs from Encode", td.Pos)
	}
	st, err := Decode(testNames, item)
	if err != nil {
		t.Fatalf("%s: invariant: the snapshot's item does not decode: %v", td.Pos, err)
	}
	if !sameTxns(st.Pending, s.modelPending()) {
		t.Errorf("%s: invariant: checkpoint %d records %v, want the pending %v", td.Pos, ck, st.Pending, s.modelPending())
	}
	return item, nil
}

func (h *harness) complete(t testing.TB, td *datadriven.TestData, a *args, b *strings.Builder) {
	s := h.subject(t, td)
	ck := a.int("checkpoint", -1)
	mode := a.str("commit", "all")
	a.done()
	var want []Txn
	if ck <= s.snapshot {
		s.completed = max(s.completed, ck)
		for _, p := range s.pending {
			if p.t.Checkpoint <= ck {
				want = append(want, p.t)
			}
		}
	}
	got := s.m.Complete(ck)
	if !sameTxns(got, want) {
		t.Errorf("%s: invariant: Complete(%d) asks to commit %v, want %v", td.Pos, ck, got, want)
	}
	if len(got) == 0 {
		b.WriteString("nothing to commit\n")
	}
	for i, c := range got {
		report := false
		switch mode {
		case "all":
			report = true
		case "first":
			report = i == 0
		case "none":
		default:
			t.Fatalf("%s: commit=%s: want all, none or first", td.Pos, mode)
		}
		if !report {
			fmt.Fprintf(b, "commit %s: not yet committed\n", fmtTxn(c))
			continue
		}
		fmt.Fprintf(b, "commit %s: committed\n", fmtTxn(c))
		h.committed(t, td, s, c, nil)
	}
	fmt.Fprintln(b, s.m.String())
}

// committed reports t committed to the machine and the model.
func (h *harness) committed(t testing.TB, td *datadriven.TestData, s *subject, c Txn, b *strings.Builder) {
	i := slices.IndexFunc(s.pending, func(p modelTxn) bool { return p.t.Slot == c.Slot && p.t.Checkpoint == c.Checkpoint })
	before := s.m.String()
	s.m.Committed(c)
	if i < 0 {
		if after := s.m.String(); after != before {
			t.Errorf("%s: invariant: Committed of a transaction not pending changed the machine:\n before %s\n after  %s", td.Pos, before, after)
		}
		if b != nil {
			fmt.Fprintf(b, "not pending: %s@%d\n", testNames.ID(c.Slot), c.Checkpoint)
		}
		return
	}
	s.pending = slices.Delete(s.pending, i, i+1)
	if b != nil {
		fmt.Fprintf(b, "committed %s@%d\n", testNames.ID(c.Slot), c.Checkpoint)
	}
}

func (s *subject) isPending(sl Slot) bool {
	return slices.ContainsFunc(s.pending, func(p modelTxn) bool { return p.t.Slot == sl })
}

func (s *subject) modelPending() []Txn {
	out := make([]Txn, len(s.pending))
	for i, p := range s.pending {
		out[i] = p.t
	}
	return out
}

// reserved is the model's set of reserved slots: those, not pending, a
// checkpoint that may still be restored names. A checkpoint this attempt
// recorded or restored may be restored while it is the newest completed
// one or above it.
func (s *subject) reserved() map[Slot]bool {
	out := map[Slot]bool{}
	for ck, slots := range s.named {
		if ck < s.completed {
			continue
		}
		for _, sl := range slots {
			if !s.isPending(sl) {
				out[sl] = true
			}
		}
	}
	return out
}

// deadline is the model's Deadline.
func (s *subject) deadline() time.Time {
	var oldest time.Time
	if s.open != nil {
		oldest = s.open.began
	}
	for _, p := range s.pending {
		if oldest.IsZero() || p.began.Before(oldest) {
			oldest = p.began
		}
	}
	if oldest.IsZero() || s.maxAge <= 0 {
		return time.Time{}
	}
	return oldest.Add(s.maxAge)
}

func (s *subject) invariants(t testing.TB, td *datadriven.TestData, now time.Time) {
	m := s.m
	fail := func(format string, args ...any) {
		t.Errorf("%s: invariant (machine %s): %s", td.Pos, s.name, fmt.Sprintf(format, args...))
	}
	bySlot := map[Slot]int64{}
	for i, p := range m.pending {
		if ck, dup := bySlot[p.Slot]; dup {
			fail("checkpoints %d and %d are both pending on %s", ck, p.Checkpoint, testNames.ID(p.Slot))
		}
		bySlot[p.Slot] = p.Checkpoint
		if p.Slot.Subtask != s.subtask {
			fail("pending %s is not the subtask's own", testNames.ID(p.Slot))
		}
		if p.Slot.Index < 0 || p.Slot.Index >= m.used {
			fail("pending %s is not below the slot count %d", testNames.ID(p.Slot), m.used)
		}
		if i > 0 && p.Checkpoint <= m.pending[i-1].Checkpoint {
			fail("pending out of order: %d after %d", p.Checkpoint, m.pending[i-1].Checkpoint)
		}
		if p.Checkpoint > m.snapshot {
			fail("pending checkpoint %d above the newest snapshot %d", p.Checkpoint, m.snapshot)
		}
		if _, ok := m.reserved[p.Slot]; ok {
			fail("pending %s is also reserved", testNames.ID(p.Slot))
		}
	}
	if m.used > MaxSlots {
		fail("slot count %d above MaxSlots %d", m.used, MaxSlots)
	}
	if m.open != nil {
		sl := Slot{s.subtask, m.open.slot}
		if _, ok := bySlot[sl]; ok {
			fail("the open slot %d is pending", m.open.slot)
		}
		if _, ok := m.reserved[sl]; ok {
			fail("the open slot %d is reserved", m.open.slot)
		}
		if m.open.slot < 0 || m.open.slot >= m.used || m.open.slot >= MaxSlots {
			fail("the open slot %d is not below the slot count %d (MaxSlots %d)", m.open.slot, m.used, MaxSlots)
		}
	}

	// The model.
	if (m.open == nil) != (s.open == nil) || (m.open != nil && (m.open.slot != s.open.slot || !m.open.began.Equal(s.open.began))) {
		fail("open %+v, want %+v", m.open, s.open)
	}
	if !sameTxns(m.pending, s.modelPending()) {
		fail("pending %v, want %v", m.pending, s.modelPending())
	}
	for i, p := range m.pending {
		if i < len(s.pending) && !p.began.Equal(s.pending[i].began) {
			fail("pending %d began %s, want %s", p.Checkpoint, fmtTime(p.began), fmtTime(s.pending[i].began))
		}
	}
	if m.snapshot != s.snapshot {
		fail("newest snapshot %d, want %d", m.snapshot, s.snapshot)
	}
	got := map[Slot]bool{}
	for sl := range m.reserved {
		got[sl] = true
	}
	if want := s.reserved(); !reflect.DeepEqual(got, want) {
		fail("reserved %v, want the slots a restorable checkpoint names: %v", sortedSlots(got), sortedSlots(want))
	}

	// The deadline.
	d := m.Deadline()
	if s.maxAge > 0 && d.IsZero() != (m.open == nil && len(m.pending) == 0) {
		fail("deadline %s with open %t and %d pending", fmtTime(d), m.open != nil, len(m.pending))
	}
	if want := s.deadline(); !d.Equal(want) {
		fail("deadline %s, want %s (oldest begin + max-age %s)", fmtTime(d), fmtTime(want), s.maxAge)
	}
	err := m.Expired(now)
	if wantExpired := !d.IsZero() && !now.Before(d); (err != nil) != wantExpired {
		fail("Expired at %s with deadline %s: %v", fmtTime(now), fmtTime(d), err)
	}
	if err != nil && !errors.Is(err, ErrExpired) {
		fail("Expired's error does not wrap ErrExpired: %v", err)
	}

	// The encoding.
	st, err := Decode(testNames, m.Encode())
	if err != nil {
		fail("Encode does not decode: %v", err)
		return
	}
	if st.Subtask != s.subtask || st.Parallelism != s.parallelism || st.Slots != m.used || !sameTxns(st.Pending, m.pending) {
		fail("Encode decodes to %+v; machine %s", st, m)
	}
}

func sortedSlots(set map[Slot]bool) []string {
	out := make([]string, 0, len(set))
	for _, s := range slices.SortedFunc(maps.Keys(set), func(a, b Slot) int {
		return cmp.Or(cmp.Compare(a.Subtask, b.Subtask), cmp.Compare(a.Index, b.Index))
	}) {
		out = append(out, testNames.ID(s))
	}
	return out
}

// sameTxns compares what a checkpoint records of transactions (not when
// they began).
func sameTxns(a, b []Txn) bool {
	return slices.EqualFunc(a, b, func(x, y Txn) bool {
		return x.Checkpoint == y.Checkpoint && x.Slot == y.Slot && x.Producer == y.Producer && x.Epoch == y.Epoch
	})
}

func fmtTxn(t Txn) string {
	return fmt.Sprintf("%s checkpoint=%d producer=%d epoch=%d", testNames.ID(t.Slot), t.Checkpoint, t.Producer, t.Epoch)
}

func fmtState(st State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "subtask=%d parallelism=%d slots=%d\n", st.Subtask, st.Parallelism, st.Slots)
	for _, t := range st.Pending {
		fmt.Fprintf(&b, "  %s\n", fmtTxn(t))
	}
	return b.String()
}

func fmtTime(t time.Time) string {
	switch {
	case t.IsZero():
		return "none"
	case t.Before(start):
		return "-" + start.Sub(t).String()
	}
	return "+" + t.Sub(start).String()
}

// ranges prints ascending ints compactly: 1-3,5.
func ranges(xs []int) string {
	if len(xs) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(xs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// buildBytes reads an item command's input: one field per line.
func buildBytes(t testing.TB, td *datadriven.TestData) []byte {
	var out []byte
	for line := range strings.SplitSeq(td.Input, "\n") {
		line, _, _ = strings.Cut(line, "#")
		kind, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		val = strings.TrimSpace(val)
		switch kind {
		case "":
		case "uvarint":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", td.Pos, line, err)
			}
			out = binary.AppendUvarint(out, n)
		case "varint":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", td.Pos, line, err)
			}
			out = binary.AppendVarint(out, n)
		case "id":
			out = binary.AppendUvarint(out, uint64(len(val)))
			out = append(out, val...)
		case "raw":
			x, err := hex.DecodeString(val)
			if err != nil {
				t.Fatalf("%s: %q: %v", td.Pos, line, err)
			}
			out = append(out, x...)
		default:
			t.Fatalf("%s: %q: want uvarint N, varint N, id TEXT or raw HEX", td.Pos, line)
		}
	}
	return out
}

// args reads a command's arguments and fails on any left unread.
type args struct {
	t    testing.TB
	td   *datadriven.TestData
	used map[string]bool
}

func (a *args) get(key string) (string, bool) {
	if a.used == nil {
		a.used = map[string]bool{}
	}
	for _, arg := range a.td.CmdArgs {
		if arg.Key == key {
			a.used[key] = true
			return strings.Join(arg.Vals, ","), true
		}
	}
	return "", false
}

// first is the command's only argument, a bare word.
func (a *args) first() string {
	if len(a.td.CmdArgs) != 1 || len(a.td.CmdArgs[0].Vals) != 0 {
		a.t.Fatalf("%s: usage: %s VALUE", a.td.Pos, a.td.Cmd)
	}
	return a.td.CmdArgs[0].Key
}

func (a *args) firstDuration() time.Duration {
	d, err := time.ParseDuration(a.first())
	if err != nil {
		a.t.Fatalf("%s: %v", a.td.Pos, err)
	}
	return d
}

func (a *args) str(key, def string) string {
	if v, ok := a.get(key); ok {
		return v
	}
	return def
}

func (a *args) int(key string, def int64) int64 {
	v, ok := a.get(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return n
}

func (a *args) dur(key string, def time.Duration) time.Duration {
	v, ok := a.get(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		a.t.Fatalf("%s: %s: %v", a.td.Pos, key, err)
	}
	return d
}

// done fails the test on an argument no one read: a typo must not pass as
// a default.
func (a *args) done() {
	for _, arg := range a.td.CmdArgs {
		if !a.used[arg.Key] {
			a.t.Fatalf("%s: unknown argument %q", a.td.Pos, arg.Key)
		}
	}
}

// FuzzDecode: Decode never panics, refuses with errCorrupt, and whatever it
// accepts encodes to bytes that decode to the same state.
func FuzzDecode(f *testing.F) {
	f.Add(State{Subtask: 0, Parallelism: 1, Slots: 4}.Encode(testNames))
	f.Add(State{Subtask: 1, Parallelism: 2, Slots: 5, Pending: []Txn{
		{Checkpoint: 2, Slot: Slot{1, 1}, Producer: 2001, Epoch: 3},
		{Checkpoint: 3, Slot: Slot{1, 4}, Producer: 2004, Epoch: 0},
	}}.Encode(testNames))
	f.Add(State{Subtask: 0, Parallelism: 1, Slots: MaxSlots, Pending: []Txn{
		{Checkpoint: 1 << 40, Slot: Slot{0, 63}, Producer: -1, Epoch: -1},
	}}.Encode(testNames))
	// An earlier version's: no slot count.
	old := binary.AppendUvarint(nil, 0)
	old = binary.AppendUvarint(old, 1)
	old = binary.AppendUvarint(old, 1)
	old = binary.AppendVarint(old, 7)
	old = binary.AppendUvarint(old, uint64(len("job-sink-0-2")))
	old = append(old, "job-sink-0-2"...)
	old = binary.AppendVarint(old, 4000)
	old = binary.AppendVarint(old, 5)
	f.Add(old)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Decode(testNames, b)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("Decode's error does not wrap errCorrupt: %v", err)
			}
			return
		}
		again, err := Decode(testNames, st.Encode(testNames))
		if err != nil {
			t.Fatalf("Decode accepted %x as %+v, whose encoding it refuses: %v", b, st, err)
		}
		if !reflect.DeepEqual(st, again) {
			t.Fatalf("Decode accepted %x as %+v; its encoding decodes to %+v", b, st, again)
		}
	})
}
