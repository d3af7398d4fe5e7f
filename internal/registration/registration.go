// Package registration is a TaskManager's membership with the JobManager
// leader as a pure state machine, in the shape of the checkpoint
// coordinator and the scheduler: it follows the leader, registers with it,
// heartbeats, and decides when the subtasks running on the TaskManager must
// go because they belong to a JobManager it no longer answers to. The
// driver (internal/leaderlink) feeds it events (the leader changed, time
// passed, an RPC answered) and carries out the effects Ready returns
// (register, heartbeat, fence incoming calls, cancel subtasks). It does no
// I/O and reads time only from its Clock, so every interleaving of leader
// changes, timeouts and late answers can be scripted (see testdata/).
//
// Losing the leader does not stop the subtasks: a new leader adopts the
// ones its jobs still have (the registration reports them, its answer
// says which to keep), so a JobManager failover costs the data path
// nothing. Only a TaskManager that stays without a registration for the
// orphan timeout cancels what it runs: no leader will adopt it by then.
package registration

import (
	"fmt"
	"time"
)

// Clock is the state machine's only source of time.
type Clock interface{ Now() time.Time }

const (
	// RetryDelay paces registration attempts after a failure or a
	// JobManager's request to register again: often enough that a
	// TaskManager is back soon after its JobManager, rarely enough not to
	// flood one that is still starting.
	RetryDelay = 200 * time.Millisecond
	// RegisterTimeout bounds a registration RPC, so that an unresponsive
	// JobManager does not hold up the next attempt or a new leader.
	RegisterTimeout = 2 * time.Second
	// DefaultInterval and DefaultTimeout stand in when a registration
	// answer carries no heartbeat settings: a zero interval would make the
	// next heartbeat always due, a zero timeout would drop the registration
	// at the first failed heartbeat.
	DefaultInterval = time.Second
	DefaultTimeout  = 5 * time.Second
	// DefaultOrphanTimeout is how long subtasks run on without a
	// registration before they are cancelled: several leader leases and a
	// recovery, so a new leader can adopt them.
	DefaultOrphanTimeout = 30 * time.Second
)

// Registration is a JobManager's answer to a successful registration.
type Registration struct {
	ID string
	// JobManagerID is the leader's identity; only its calls are obeyed.
	JobManagerID string
	// Interval is how often the JobManager wants a heartbeat, Timeout how
	// long it waits for one before it declares this TaskManager lost. The
	// TaskManager applies the same timeout the other way round.
	Interval, Timeout time.Duration
	// Keep names (by ExecutionAttemptID.Key) the subtasks the JobManager
	// adopted among those the registration reported; the others are
	// cancelled before the first heartbeat.
	Keep []string
}

type rpcKind int

const (
	noRPC rpcKind = iota
	registerRPC
	heartbeatRPC
)

// Member is one TaskManager's registration with the JobManager leader.
//
// At most one RPC is outstanding at a time: a registration and a heartbeat
// racing each other could leave the JobManager holding a registration the
// TaskManager does not use. Each RPC gets a sequence number; an answer
// whose number is not the outstanding one belongs to an earlier leader or
// registration that was given up, and is ignored.
type Member struct {
	clock  Clock
	orphan time.Duration

	// leader is the JobManager leader's address as last reported; "" while
	// none is known.
	leader string
	// addr is where the current (or last) registration went. It outlives a
	// spell without a known leader: a leader that reappears at the same
	// address gets the heartbeats again, and one that is in fact a new
	// process answers them with Reregister.
	addr string

	registered bool
	reg        Registration
	// lastOK is when the JobManager last confirmed the registration
	// (registered or answered a heartbeat).
	lastOK time.Time
	// registerAt is the earliest next registration attempt (unregistered);
	// heartbeatAt the next heartbeat (registered).
	registerAt  time.Time
	heartbeatAt time.Time

	seq      uint64
	inflight uint64 // the outstanding RPC's sequence number; 0: none
	kind     rpcKind

	// orphanedAt is when the last registration ended; zero while
	// registered, and once the subtasks were cancelled for it.
	orphanedAt time.Time

	effects []Effect
}

// New returns a Member that knows no leader yet, whose subtasks run on
// for orphan without a registration (DefaultOrphanTimeout when 0).
func New(clock Clock, orphan time.Duration) *Member {
	if orphan <= 0 {
		orphan = DefaultOrphanTimeout
	}
	return &Member{clock: clock, orphan: orphan}
}

// Ready returns the effects decided since the last call, in order.
func (m *Member) Ready() []Effect {
	e := m.effects
	m.effects = nil
	return e
}

func (m *Member) emit(e Effect) { m.effects = append(m.effects, e) }

// NextDeadline is when Tick must next be called; zero if no time-driven
// step is pending (the next one waits for an event). After any event it is
// zero or in the future: whatever was due has been done.
func (m *Member) NextDeadline() time.Time {
	next := m.nextCall()
	if !m.orphanedAt.IsZero() && m.kind != registerRPC {
		if at := m.orphanedAt.Add(m.orphan); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

func (m *Member) nextCall() time.Time {
	switch {
	case m.leader == "":
		// Nobody to talk to: only the registration can run out.
		if m.registered {
			return m.lastOK.Add(m.reg.Timeout)
		}
		return time.Time{}
	case m.inflight != 0:
		// Its answer (or its timeout, which the driver reports as an
		// error) moves things on.
		return time.Time{}
	case !m.registered:
		return m.registerAt
	default:
		return m.heartbeatAt
	}
}

// LeaderChanged reports the JobManager leader's address; "" means none is
// known (an election is under way, or etcd is unreachable).
func (m *Member) LeaderChanged(addr string) {
	if addr == m.leader {
		return
	}
	m.leader = addr
	if addr != "" && m.addr != "" && addr != m.addr {
		// Whatever runs here was deployed by the old leader; the new one
		// adopts it when its registration reports it.
		if m.registered {
			m.unregister(fmt.Sprintf("jobmanager leader moved from %s to %s", m.addr, addr), time.Time{})
		}
		// An RPC to the old leader is given up rather than waited for: it
		// may hang until its timeout, and its answer no longer matters.
		m.inflight, m.kind = 0, noRPC
		m.registerAt = time.Time{}
	}
	m.step()
}

// Tick tells the member time passed; the driver calls it once
// NextDeadline is reached.
func (m *Member) Tick() { m.step() }

// Registered reports the outcome of Register seq. It reports false when
// the answer came too late to matter and was ignored.
func (m *Member) Registered(seq uint64, r Registration, err error) bool {
	if seq == 0 || seq != m.inflight || m.kind != registerRPC {
		return false
	}
	m.inflight, m.kind = 0, noRPC
	now := m.clock.Now()
	if err != nil {
		m.registerAt = now.Add(RetryDelay)
		m.step()
		return true
	}
	if r.Interval <= 0 {
		r.Interval = DefaultInterval
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	m.registered, m.reg, m.lastOK = true, r, now
	m.orphanedAt = time.Time{}
	// The fence goes up before the first heartbeat: that heartbeat tells
	// the JobManager this TaskManager obeys it, and it deploys right after.
	m.emit(Fence{JobManagerID: r.JobManagerID, Registration: r.ID})
	// What the JobManager did not adopt stops before then too.
	m.emit(CancelSubtasks{Reason: "not adopted by jobmanager " + m.addr, Keep: r.Keep})
	m.heartbeatAt = now
	m.step()
	return true
}

// HeartbeatDone reports the outcome of Heartbeat seq: reregister is the
// JobManager's request to register again (it does not know this
// registration). It reports false when the answer was ignored.
func (m *Member) HeartbeatDone(seq uint64, reregister bool, err error) bool {
	if seq == 0 || seq != m.inflight || m.kind != heartbeatRPC {
		return false
	}
	m.inflight, m.kind = 0, noRPC
	now := m.clock.Now()
	switch {
	case err == nil && !reregister:
		m.lastOK = now
	case err == nil:
		// The JobManager dropped us (it timed us out, or it is a new
		// process at the old address): the next registration reports what
		// runs here, and it keeps what it still has.
		m.unregister(fmt.Sprintf("jobmanager %s asked to register again", m.addr), now.Add(RetryDelay))
	case m.expired(now):
		// The JobManager died (a new leader will adopt what runs here) or
		// declared this TaskManager lost (it will not keep what it
		// replaced elsewhere): the next registration tells which.
		m.unregister(fmt.Sprintf("jobmanager %s unreachable for %v: %v", m.addr, m.reg.Timeout, err), now.Add(RetryDelay))
	}
	m.step()
	return true
}

// expired reports whether the registration went unconfirmed for its
// heartbeat timeout. It counts the deadline itself as passed, so that a
// Tick at NextDeadline acts rather than asking for the same deadline again.
func (m *Member) expired(now time.Time) bool {
	return !now.Before(m.lastOK.Add(m.reg.Timeout))
}

// unregister drops the registration and any RPC made for it; the next
// attempt comes no earlier than retryAt. The subtasks run on, orphaned,
// for the orphan timeout.
func (m *Member) unregister(reason string, retryAt time.Time) {
	m.emit(Unregistered{Reason: reason})
	if m.registered {
		m.orphanedAt = m.clock.Now()
	}
	m.registered, m.reg = false, Registration{}
	m.inflight, m.kind = 0, noRPC
	m.registerAt = retryAt
}

// step does whatever is due now.
func (m *Member) step() {
	now := m.clock.Now()
	if !m.orphanedAt.IsZero() && m.kind != registerRPC && !now.Before(m.orphanedAt.Add(m.orphan)) {
		// No leader adopted them in time: a new one has redeployed them
		// from a checkpoint by now, or will. Not while a registration is
		// under way: it reports them, and its answer may keep them.
		m.orphanedAt = time.Time{}
		m.emit(CancelSubtasks{Reason: fmt.Sprintf("not registered with a jobmanager for %v", m.orphan)})
	}
	if m.leader == "" {
		if m.registered && m.expired(now) {
			m.unregister(fmt.Sprintf("no jobmanager leader for %v", m.reg.Timeout), time.Time{})
		}
		return
	}
	if m.inflight != 0 {
		return
	}
	switch {
	case !m.registered && !now.Before(m.registerAt):
		// The registration reports what runs here; the answer says what
		// the leader keeps.
		m.addr = m.leader
		m.send(registerRPC)
		m.emit(Register{Seq: m.inflight, Addr: m.addr, Timeout: RegisterTimeout})
	case m.registered && !now.Before(m.heartbeatAt):
		m.send(heartbeatRPC)
		// A slow answer does not shift the schedule by its own delay: the
		// heartbeat after it goes out at once if it is already due.
		m.heartbeatAt = now.Add(m.reg.Interval)
		m.emit(Heartbeat{Seq: m.inflight, Addr: m.addr, Registration: m.reg.ID, Timeout: m.reg.Interval})
	}
}

func (m *Member) send(k rpcKind) {
	m.seq++
	m.inflight, m.kind = m.seq, k
}
