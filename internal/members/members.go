// Package members holds the TaskManagers a JobManager admitted: their
// registrations, the heartbeats that renew them, the timeout that drops
// the silent, and the slots they offer. It is a pure structure: no I/O,
// no clock of its own (times are arguments), no lock (its owner holds
// one). The JobManager keeps its connection to each TaskManager as the
// member's Data; the control-plane simulator keeps nothing.
package members

import (
	"slices"
	"strings"
	"time"
)

// Member is one TaskManager's registration.
type Member[T any] struct {
	ID string
	// Registration names this registration: a heartbeat of an older one
	// is told to register again.
	Registration  string
	Slots         int
	LastHeartbeat time.Time
	// Confirmed: a heartbeat showed the TaskManager took the registration
	// (and obeys this JobManager); only then are subtasks placed on it.
	Confirmed bool
	Data      T
}

// Registry holds the members by TaskManager ID.
type Registry[T any] struct {
	byID map[string]*Member[T]
}

// New returns an empty registry.
func New[T any]() *Registry[T] {
	return &Registry[T]{byID: map[string]*Member[T]{}}
}

// Register admits TaskManager id under registration, or renews it:
// replaced is the registration it replaces (nil if none), whose subtasks
// are gone — a TaskManager registering again restarted or lost this
// JobManager.
func (r *Registry[T]) Register(id, registration string, slots int, data T, now time.Time) (replaced *Member[T]) {
	replaced = r.byID[id]
	r.byID[id] = &Member[T]{ID: id, Registration: registration, Slots: slots, LastHeartbeat: now, Data: data}
	return replaced
}

// Heartbeat renews registration of id. m is nil when that is not the
// current registration (the TaskManager must register again); confirmed
// is true for the registration's first heartbeat, when its slots become
// available.
func (r *Registry[T]) Heartbeat(id, registration string, now time.Time) (m *Member[T], confirmed bool) {
	m = r.byID[id]
	if m == nil || m.Registration != registration {
		return nil, false
	}
	m.LastHeartbeat = now
	confirmed = !m.Confirmed
	m.Confirmed = true
	return m, confirmed
}

// Expire drops and returns, sorted by ID, the members whose last
// heartbeat is more than timeout before now.
func (r *Registry[T]) Expire(now time.Time, timeout time.Duration) []*Member[T] {
	var lost []*Member[T]
	for id, m := range r.byID {
		if now.Sub(m.LastHeartbeat) > timeout {
			lost = append(lost, m)
			delete(r.byID, id)
		}
	}
	slices.SortFunc(lost, func(a, b *Member[T]) int { return strings.Compare(a.ID, b.ID) })
	return lost
}

// Remove drops registration of id (its connection failed); nil when it is
// gone already or id registered again since.
func (r *Registry[T]) Remove(id, registration string) *Member[T] {
	m := r.byID[id]
	if m == nil || m.Registration != registration {
		return nil
	}
	delete(r.byID, id)
	return m
}

// Get is id's current registration, nil if none.
func (r *Registry[T]) Get(id string) *Member[T] { return r.byID[id] }

// Len is the number of members.
func (r *Registry[T]) Len() int { return len(r.byID) }

// All lists the members sorted by ID.
func (r *Registry[T]) All() []*Member[T] {
	out := make([]*Member[T], 0, len(r.byID))
	for _, m := range r.byID {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Member[T]) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Clear drops every member and returns them sorted by ID (a JobManager
// that stops leading, or stops).
func (r *Registry[T]) Clear() []*Member[T] {
	all := r.All()
	clear(r.byID)
	return all
}

// FreeSlots lists one member ID per free slot of the confirmed members,
// given the slots used on each: round robin over the members sorted by
// ID, so that consecutive subtasks land on different TaskManagers.
func (r *Registry[T]) FreeSlots(used map[string]int) []string {
	var ms []*Member[T]
	for _, m := range r.All() {
		if m.Confirmed {
			ms = append(ms, m)
		}
	}
	taken := make(map[string]int, len(ms))
	for _, m := range ms {
		taken[m.ID] = used[m.ID]
	}
	var slots []string
	for more := true; more; {
		more = false
		for _, m := range ms {
			if taken[m.ID] < m.Slots {
				taken[m.ID]++
				slots = append(slots, m.ID)
				more = true
			}
		}
	}
	return slots
}
