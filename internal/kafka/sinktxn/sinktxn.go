// Package sinktxn holds the exactly-once Kafka sink's transactions as a
// pure state machine: which transactional IDs a subtask writes on, what a
// checkpoint records of them, what a completion commits, what a restore
// commits and fences, and when an uncommitted transaction has lived too
// long. The sink (internal/kafka) does the broker I/O the machine asks for
// and reports the results; the machine does none and reads no clock.
//
// # The protocol
//
// A subtask writes records into a transaction on one of its transactional
// IDs, <prefix>-<vertex>-<subtask>-<slot>. At a checkpoint's snapshot the
// open transaction is flushed (pre-committed) and recorded in the
// checkpoint with the producer ID and epoch that wrote it; when a
// checkpoint completes, every transaction pre-committed up to it is
// committed. A checkpoint that is aborted leaves its transaction pending:
// its records are behind the positions of the next checkpoint, so the next
// completed one commits it.
//
// A restore commits what the restored checkpoint recorded, by resuming
// each transaction with its stored producer ID and epoch. This is
// idempotent only while nobody initialised that transactional ID again:
// the broker answers a repeated commit with success as long as the
// transaction is the producer's last one (Kafka before 4: same epoch,
// state complete; Kafka 4's transactions version 2: the epoch one below
// the current). So the machine keeps two rules:
//
//   - A slot whose transaction is named by a checkpoint that may still be
//     restored is reserved: neither reused nor fenced. A checkpoint may be
//     restored if no later one is known to have completed, so a slot
//     committed while checkpoint L was the newest snapshot is free again
//     once a checkpoint above L completed. A restore of checkpoint K
//     reserves the slots K names until a checkpoint above K completes.
//   - Everything else of the subtasks this one answers for is fenced at a
//     restore (initialised anew, which aborts what it left open): its own
//     slots up to the highest one any checkpoint recorded, and any open
//     transaction the brokers list under the prefix whose subtask maps to
//     this one (slots used after the last checkpoint, subtasks of an
//     attempt at a higher parallelism).
//
// Slots are a pool, not a fixed ring: a subtask with several checkpoints
// pre-committed and not completed, or with reserved slots, takes the
// lowest free index, up to MaxSlots.
//
// # The transaction timeout
//
// A broker aborts a transaction older than transaction-timeout. A pending
// transaction that is carried over aborted checkpoints would eventually be
// aborted and its records lost, so the machine reports (Expired) when the
// oldest uncommitted transaction is older than maxAge: the sink then fails
// the subtask, the job restores its last completed checkpoint, and the
// restore commits or aborts every transaction long before the broker's
// timer. maxAge plus the restart delay and the restore must fit in
// transaction-timeout; the job graph's validation checks it at submit.
package sinktxn

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxSlots bounds a subtask's transactional IDs: a subtask that would need
// more has carried that many transactions without a completed checkpoint.
const MaxSlots = 64

// InitialSlots is how many slots a restore fences at least: the ring size
// of earlier versions, whose checkpoints do not record how many they used.
const InitialSlots = 4

// Slot identifies a transactional ID: slot Index of subtask Subtask.
type Slot struct{ Subtask, Index int }

// Names formats and parses a vertex's transactional IDs.
type Names struct{ Prefix, Vertex string }

// ID is the transactional ID of s.
func (n Names) ID(s Slot) string {
	return n.Prefix + "-" + n.Vertex + "-" + strconv.Itoa(s.Subtask) + "-" + strconv.Itoa(s.Index)
}

// Parse is the slot of one of this vertex's transactional IDs.
func (n Names) Parse(id string) (Slot, bool) {
	rest, ok := strings.CutPrefix(id, n.Prefix+"-"+n.Vertex+"-")
	if !ok {
		return Slot{}, false
	}
	sub, idx, ok := strings.Cut(rest, "-")
	if !ok {
		return Slot{}, false
	}
	k, err1 := strconv.Atoi(sub)
	i, err2 := strconv.Atoi(idx)
	if err1 != nil || err2 != nil || k < 0 || i < 0 || strconv.Itoa(k) != sub || strconv.Itoa(i) != idx {
		return Slot{}, false
	}
	return Slot{k, i}, true
}

// Txn is a pre-committed transaction as a checkpoint records it.
type Txn struct {
	Checkpoint int64
	Slot       Slot
	Producer   int64
	Epoch      int16

	began time.Time // zero for one restored
}

// Plan is what a restore asks of the sink, in order: commit each of Commit
// (a commit the broker already applied is success), then fence each of
// Fence, then list the brokers' open transactions and fence those
// FenceOpen accepts.
type Plan struct {
	Commit []Txn
	Fence  []Slot
}

// Machine is one sink subtask's transactions.
type Machine struct {
	names       Names
	subtask     int
	parallelism int
	maxAge      time.Duration

	open     *openTxn
	pending  []Txn
	reserved map[Slot]int64 // free once a checkpoint above the value completed
	used     int            // own slots 0..used-1 may hold transactions
	// snapshot is the newest checkpoint this attempt recorded (or
	// restored), first the oldest it recorded: a completion outside them
	// is not one of this attempt's.
	snapshot, first int64
}

type openTxn struct {
	slot  int
	began time.Time
}

// New is the machine of subtask of a vertex at parallelism; maxAge is how
// long an uncommitted transaction may live before Expired reports it.
func New(names Names, subtask, parallelism int, maxAge time.Duration) *Machine {
	return &Machine{names: names, subtask: subtask, parallelism: parallelism, maxAge: maxAge, reserved: map[Slot]int64{}}
}

// Restore starts the machine from the items every subtask of checkpoint
// restored stored (0 and nothing for a first start) and plans the
// recovery.
func (m *Machine) Restore(checkpoint int64, items [][]byte) (Plan, error) {
	var plan Plan
	oldParallelism := 0
	used := map[int]int{} // old subtask → slots it recorded
	for _, it := range items {
		st, err := Decode(m.names, it)
		if err != nil {
			return Plan{}, fmt.Errorf("restored state: %w", err)
		}
		oldParallelism = max(oldParallelism, st.Parallelism)
		used[st.Subtask] = max(used[st.Subtask], st.Slots)
		if st.Subtask%m.parallelism != m.subtask {
			continue
		}
		for _, t := range st.Pending {
			if t.Slot.Subtask%m.parallelism != m.subtask {
				return Plan{}, fmt.Errorf("restored state: subtask %d recorded a transaction of subtask %d", st.Subtask, t.Slot.Subtask)
			}
			plan.Commit = append(plan.Commit, t)
		}
	}
	slices.SortStableFunc(plan.Commit, func(a, b Txn) int { return cmp.Compare(a.Checkpoint, b.Checkpoint) })
	m.snapshot = checkpoint
	if !has(bugFenceRestored) {
		for _, t := range plan.Commit {
			m.reserved[t.Slot] = checkpoint
		}
	}
	m.used = max(used[m.subtask], InitialSlots)
	for k := m.subtask; k < max(oldParallelism, m.subtask+1); k += m.parallelism {
		n := max(used[k], InitialSlots)
		if k == m.subtask {
			n = m.used
		}
		for i := range n {
			if s := (Slot{k, i}); !m.isReserved(s) {
				plan.Fence = append(plan.Fence, s)
			}
		}
	}
	return plan, nil
}

func (m *Machine) isReserved(s Slot) bool {
	_, ok := m.reserved[s]
	return ok
}

// FenceOpen says whether an open transaction the brokers list, with
// transactional ID id, is one this subtask must abort at its restore: one
// of this vertex, of a subtask this one answers for, and not reserved.
func (m *Machine) FenceOpen(id string) bool {
	s, ok := m.names.Parse(id)
	return ok && s.Subtask%m.parallelism == m.subtask && !m.isReserved(s)
}

// Begin opens a transaction for the next record, at now, and returns its
// slot.
func (m *Machine) Begin(now time.Time) (Slot, error) {
	if m.open != nil {
		return Slot{m.subtask, m.open.slot}, nil
	}
	if len(m.pending) >= MaxSlots-1 {
		// The next snapshot would name every slot, and a restore of it
		// reserves all it names until a later checkpoint completes: the
		// restored subtask could open no transaction, so none could ever
		// complete. Failing over now restores an earlier checkpoint.
		return Slot{}, fmt.Errorf("%d transactions of checkpoints that did not complete are still carried; one more would leave a restore of the next checkpoint no transactional id to write with", len(m.pending))
	}
	for i := range MaxSlots {
		s := Slot{m.subtask, i}
		if m.isReserved(s) || m.isPending(s) {
			continue
		}
		m.open = &openTxn{slot: i, began: now}
		m.used = max(m.used, i+1)
		return s, nil
	}
	return Slot{}, fmt.Errorf("all %d transactional ids are taken: %d hold transactions pre-committed and not yet committed, %d committed ones a restorable checkpoint still names", MaxSlots, len(m.pending), len(m.reserved))
}

func (m *Machine) isPending(s Slot) bool {
	for _, t := range m.pending {
		if t.Slot == s {
			return true
		}
	}
	return false
}

// Open is the slot of the open transaction, if one holds records: the one
// a snapshot flushes and pre-commits, and a close aborts.
func (m *Machine) Open() (Slot, bool) {
	if m.open == nil {
		return Slot{}, false
	}
	return Slot{m.subtask, m.open.slot}, true
}

// Producer is the producer ID and epoch that wrote a transaction.
type Producer struct {
	ID    int64
	Epoch int16
}

// Snapshot records checkpoint: the open transaction, flushed by the sink
// and written by p, becomes pending (p is nil when none is open). It
// returns the item the subtask stores.
func (m *Machine) Snapshot(checkpoint int64, p *Producer) ([]byte, error) {
	if (p != nil) != (m.open != nil) {
		return nil, fmt.Errorf("snapshot %d: producer given %v, transaction open %v", checkpoint, p != nil, m.open != nil)
	}
	if checkpoint <= m.snapshot {
		return nil, fmt.Errorf("snapshot %d after checkpoint %d", checkpoint, m.snapshot)
	}
	if m.first == 0 {
		m.first = checkpoint
	}
	if p != nil {
		m.pending = append(m.pending, Txn{Checkpoint: checkpoint, Slot: Slot{m.subtask, m.open.slot}, Producer: p.ID, Epoch: p.Epoch, began: m.open.began})
		m.open = nil
	}
	m.snapshot = checkpoint
	return m.Encode(), nil
}

// Encode is the item of the subtask's current state (what a restore of a
// checkpoint taken now would read).
func (m *Machine) Encode() []byte {
	return State{Subtask: m.subtask, Parallelism: m.parallelism, Slots: m.used, Pending: m.pending}.Encode(m.names)
}

// Complete says checkpoint completed and returns the transactions to
// commit, oldest first; the sink commits each and reports it with
// Committed. A completion of a checkpoint this attempt never recorded (a
// late one of an earlier attempt) commits nothing.
func (m *Machine) Complete(checkpoint int64) []Txn {
	if m.first == 0 || checkpoint < m.first || checkpoint > m.snapshot {
		return nil
	}
	for s, until := range m.reserved {
		if checkpoint > until {
			delete(m.reserved, s)
		}
	}
	var out []Txn
	for _, t := range m.pending {
		if t.Checkpoint <= checkpoint {
			out = append(out, t)
		}
	}
	return out
}

// Committed says the sink committed t. Every checkpoint recorded up to now
// names t, so its slot stays reserved until a later one completes.
func (m *Machine) Committed(t Txn) {
	i := slices.IndexFunc(m.pending, func(p Txn) bool { return p.Slot == t.Slot && p.Checkpoint == t.Checkpoint })
	if i < 0 {
		return
	}
	m.pending = slices.Delete(m.pending, i, i+1)
	if !has(bugReuseCommitted) {
		m.reserved[t.Slot] = m.snapshot
	}
}

// ErrExpired is wrapped by Expired's error.
var ErrExpired = errors.New("an uncommitted transaction is older than transaction-max-age")

// Expired reports, at now, an uncommitted transaction older than maxAge:
// the sink must fail so the job restores before the broker aborts it.
func (m *Machine) Expired(now time.Time) error {
	d := m.Deadline()
	if d.IsZero() || now.Before(d) {
		return nil
	}
	oldest, ck := m.oldest()
	what := "the open transaction"
	if ck > 0 {
		what = fmt.Sprintf("the transaction pre-committed at checkpoint %d", ck)
	}
	return fmt.Errorf("%w: %s was opened %s ago (limit %s) and is not committed yet: failing over to the last completed checkpoint, which commits or aborts it before the broker's transaction timeout would",
		ErrExpired, what, now.Sub(oldest).Round(time.Millisecond), m.maxAge)
}

// Deadline is when Expired will report, zero while nothing is uncommitted.
func (m *Machine) Deadline() time.Time {
	oldest, _ := m.oldest()
	if oldest.IsZero() || m.maxAge <= 0 || has(bugCarryForever) {
		return time.Time{}
	}
	return oldest.Add(m.maxAge)
}

func (m *Machine) oldest() (time.Time, int64) {
	var t time.Time
	var ck int64
	for _, p := range m.pending {
		if !p.began.IsZero() && (t.IsZero() || p.began.Before(t)) {
			t, ck = p.began, p.Checkpoint
		}
	}
	if m.open != nil && (t.IsZero() || m.open.began.Before(t)) {
		t, ck = m.open.began, 0
	}
	return t, ck
}

// Pending are the pre-committed transactions not yet committed.
func (m *Machine) Pending() []Txn { return slices.Clone(m.pending) }

// String is the machine's state for scenario tests and logs.
func (m *Machine) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "subtask=%d/%d snapshot=%d used=%d", m.subtask, m.parallelism, m.snapshot, m.used)
	if m.open != nil {
		fmt.Fprintf(&b, " open=%d", m.open.slot)
	}
	for _, t := range m.pending {
		fmt.Fprintf(&b, " pending=%d@%d", t.Slot.Index, t.Checkpoint)
	}
	rs := make([]Slot, 0, len(m.reserved))
	for s := range m.reserved {
		rs = append(rs, s)
	}
	slices.SortFunc(rs, func(a, b Slot) int {
		return cmp.Or(cmp.Compare(a.Subtask, b.Subtask), cmp.Compare(a.Index, b.Index))
	})
	for _, s := range rs {
		fmt.Fprintf(&b, " reserved=%d-%d<=%d", s.Subtask, s.Index, m.reserved[s])
	}
	return b.String()
}

// State is what one subtask stores in a checkpoint.
type State struct {
	Subtask, Parallelism int
	// Slots: the subtask's slots 0..Slots-1 may hold transactions (0 in
	// states of earlier versions).
	Slots   int
	Pending []Txn
}

// Encode is s as a checkpoint stores it: subtask, parallelism, the
// transactions (checkpoint, transactional ID, producer ID, epoch), then
// the slot count, which earlier versions did not write.
func (s State) Encode(n Names) []byte {
	b := binary.AppendUvarint(nil, uint64(s.Subtask))
	b = binary.AppendUvarint(b, uint64(s.Parallelism))
	b = binary.AppendUvarint(b, uint64(len(s.Pending)))
	for _, t := range s.Pending {
		id := n.ID(t.Slot)
		b = binary.AppendVarint(b, t.Checkpoint)
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
		b = binary.AppendVarint(b, t.Producer)
		b = binary.AppendVarint(b, int64(t.Epoch))
	}
	return binary.AppendUvarint(b, uint64(s.Slots))
}

var errCorrupt = errors.New("corrupt kafka-sink state")

// Decode reads an item Encode wrote, or one of an earlier version.
func Decode(n Names, b []byte) (State, error) {
	var err error
	u := func() uint64 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			err = errCorrupt
			return 0
		}
		b = b[k:]
		return v
	}
	v := func() int64 {
		x, k := binary.Varint(b)
		if k <= 0 {
			err = errCorrupt
			return 0
		}
		b = b[k:]
		return x
	}
	var s State
	sub, par, count := u(), u(), u()
	if err != nil || par == 0 || par > 1<<20 || sub >= par || count > uint64(len(b)) {
		return State{}, errCorrupt
	}
	s.Subtask, s.Parallelism = int(sub), int(par)
	for i := uint64(0); i < count && err == nil; i++ {
		t := Txn{Checkpoint: v()}
		l := u()
		if err != nil || l > uint64(len(b)) || t.Checkpoint <= 0 {
			return State{}, errCorrupt
		}
		id := string(b[:l])
		b = b[l:]
		producer, epoch := v(), v()
		if epoch < 0 || epoch > math.MaxInt16 {
			return State{}, errCorrupt
		}
		t.Producer, t.Epoch = producer, int16(epoch)
		slot, ok := n.Parse(id)
		if !ok {
			return State{}, fmt.Errorf("%w: transactional id %q is not one of vertex %q with prefix %q", errCorrupt, id, n.Vertex, n.Prefix)
		}
		if slot.Index >= MaxSlots {
			return State{}, errCorrupt
		}
		t.Slot = slot
		s.Pending = append(s.Pending, t)
	}
	if len(b) > 0 && err == nil {
		slots := u()
		if slots > MaxSlots {
			return State{}, errCorrupt
		}
		s.Slots = int(slots)
	}
	if err != nil || len(b) != 0 {
		return State{}, errCorrupt
	}
	return s, nil
}
