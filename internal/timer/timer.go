// Package timer is the timer service of a keyed operator, as Flink's
// InternalTimerService: event-time and processing-time timers, each of a
// key and a namespace (a window, say), fired in timestamp order.
//
// It is a data structure only: no goroutine, no clock. The runtime asks
// Next when to wake up and Pops the timers that are due when the
// watermark passes them or the processing-time clock reaches them, on the
// mailbox goroutine like everything else of the operator.
//
// Timers are kept twice. In memory, a min-heap per time domain and a set
// that deduplicates registrations (a window operator registers the same
// timer for every record of a window). And in keyed state, one map state
// entry per timer under the timer's key, so timers are in every checkpoint
// and savepoint whichever backend holds the state, and follow their key
// group to whichever subtask owns it after a rescale. Restore rebuilds the
// heaps from that state.
package timer

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/sdk"
)

// StateName is the map state the timers are mirrored into: user key the
// domain, the timestamp and the namespace (see Service); value empty.
// Operators must not use it.
const StateName = "__weir_timers"

// Domain is a timer's time domain.
type Domain uint8

const (
	// EventTime timers fire when the watermark passes them.
	EventTime Domain = iota
	// ProcessingTime timers fire when the wall clock reaches them.
	ProcessingTime

	numDomains = 2
)

func (d Domain) String() string {
	switch d {
	case EventTime:
		return "event-time"
	case ProcessingTime:
		return "processing-time"
	}
	return fmt.Sprintf("Domain(%d)", uint8(d))
}

// Timer is a pending or fired timer.
type Timer struct {
	Domain    Domain
	Timestamp int64
	Key       []byte
	Namespace []byte
}

// Keyed is the keyed state the service mirrors its timers into, so they
// are in every checkpoint and savepoint (heap and Pebble) and follow their
// key group on rescale. state.Backend satisfies it.
type Keyed interface {
	SetCurrentKey(key []byte)
	MapState(name string) sdk.MapState
	ScanMap(name string, fn func(key, userKey, value []byte) error) error
}

// Service holds the timers of one subtask of a keyed operator. It is not
// safe for concurrent use: the mailbox goroutine owns it, as it owns the
// state backend.
type Service struct {
	k      Keyed
	mirror sdk.MapState
	queues [numDomains]queue
	// index deduplicates: every pending timer by its id. peak is the most
	// it held since it was last rebuilt: Go maps never shrink, so it is
	// rebuilt once most of its timers are gone (see compact).
	index map[string]*entry
	peak  int
	// buf is scratch for the id of the timer looked up last, whose tail is
	// the user key of its mirrored entry.
	buf []byte
}

// New returns a service without timers that mirrors them into k. A
// service of a restored subtask calls Restore once the backend restored.
func New(k Keyed) *Service {
	return &Service{k: k, mirror: k.MapState(StateName), index: map[string]*entry{}}
}

// entry is a pending timer. Its id is the key's length (4 bytes, big
// endian), the key, then the user key of its mirrored entry: the domain,
// the timestamp as 8 big-endian bytes with the sign bit flipped (so that
// byte order is time order) and the namespace. The id identifies the timer
// (domain, key, namespace, timestamp) and holds all its bytes, in one
// allocation.
type entry struct {
	id  string
	ts  int64
	kl  int32 // the key's length
	pos int32 // in its domain's heap
}

const (
	keyLenSize = 4
	tsSize     = 8
	// userKeyHeader is the domain and timestamp that start a user key.
	userKeyHeader = 1 + tsSize
)

func (e *entry) key() string       { return e.id[keyLenSize : keyLenSize+e.kl] }
func (e *entry) userKey() string   { return e.id[keyLenSize+e.kl:] }
func (e *entry) namespace() string { return e.id[keyLenSize+int(e.kl)+userKeyHeader:] }

// appendID appends the id of a timer to dst.
func appendID(dst []byte, d Domain, key, namespace []byte, ts int64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
	dst = append(dst, key...)
	return appendUserKey(dst, d, namespace, ts)
}

// appendUserKey appends the user key a timer is mirrored under to dst.
func appendUserKey(dst []byte, d Domain, namespace []byte, ts int64) []byte {
	dst = append(dst, byte(d))
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
	return append(dst, namespace...)
}

// decodeUserKey splits a mirrored entry's user key.
func decodeUserKey(uk []byte) (d Domain, ts int64, namespace []byte, err error) {
	if len(uk) < userKeyHeader {
		return 0, 0, nil, fmt.Errorf("timer: mirrored user key %x is too short", uk)
	}
	d = Domain(uk[0])
	if d >= numDomains {
		return 0, 0, nil, fmt.Errorf("timer: mirrored user key %x: unknown domain %d", uk, d)
	}
	return d, int64(binary.BigEndian.Uint64(uk[1:userKeyHeader]) ^ (1 << 63)), uk[userKeyHeader:], nil
}

func checkDomain(d Domain) {
	if d >= numDomains {
		panic(fmt.Sprintf("timer: unknown domain %d", d))
	}
}

// lookup puts the id of a timer in s.buf and returns the timer if it is
// pending.
func (s *Service) lookup(d Domain, key, namespace []byte, ts int64) (*entry, bool) {
	checkDomain(d)
	s.buf = appendID(s.buf[:0], d, key, namespace, ts)
	e, ok := s.index[string(s.buf)] // no allocation
	return e, ok
}

// Register adds a timer for key, which must be the backend's current key:
// the runtime registers timers only while it processes a record or a timer
// of that key. Registering a pending timer again is a no-op that returns
// false and touches neither the backend nor, once the service's scratch
// buffer is large enough, the Go heap. A timer already due (at or before
// the watermark or the clock) is allowed: it fires at the next Pop.
func (s *Service) Register(d Domain, key, namespace []byte, ts int64) bool {
	if _, ok := s.lookup(d, key, namespace, ts); ok {
		return false
	}
	e := &entry{id: string(s.buf), ts: ts, kl: int32(len(key))}
	s.index[e.id] = e
	s.peak = max(s.peak, len(s.index))
	s.queues[d].push(e)
	s.mirror.Put(s.buf[keyLenSize+len(key):], nil)
	return true
}

// Delete removes a pending timer of key, which must be the backend's
// current key, as for Register. It reports whether the timer was pending.
func (s *Service) Delete(d Domain, key, namespace []byte, ts int64) bool {
	e, ok := s.lookup(d, key, namespace, ts)
	if !ok {
		return false
	}
	s.queues[d].remove(int(e.pos))
	delete(s.index, e.id)
	s.compact()
	s.mirror.Remove(s.buf[keyLenSize+len(key):])
	return true
}

// Next returns the earliest timestamp of the timers pending in d.
func (s *Service) Next(d Domain) (int64, bool) {
	checkDomain(d)
	q := s.queues[d]
	if len(q) == 0 {
		return 0, false
	}
	return q[0].ts, true
}

// Pop removes and returns the earliest timer of d whose timestamp is at
// most upTo. Timers come in timestamp order; those of the same timestamp
// by key, then namespace, in byte order, so timers fire in the same order
// in every run and after every restore. Pop sets the backend's current key
// to the timer's key and removes the timer's mirrored entry; the key stays
// current, for the operator's OnTimer to run with that key's state. The
// returned slices are the caller's.
func (s *Service) Pop(d Domain, upTo int64) (Timer, bool) {
	checkDomain(d)
	q := &s.queues[d]
	if len(*q) == 0 || (*q)[0].ts > upTo {
		return Timer{}, false
	}
	e := q.pop()
	delete(s.index, e.id)
	s.compact()
	id := []byte(e.id)
	key := id[keyLenSize : keyLenSize+e.kl : keyLenSize+e.kl]
	uk := id[keyLenSize+e.kl:]
	s.k.SetCurrentKey(key)
	s.mirror.Remove(uk)
	return Timer{Domain: d, Timestamp: e.ts, Key: key, Namespace: uk[userKeyHeader:]}, true
}

// compact rebuilds the index once it holds an eighth of the timers it
// held at its peak: the memory of a burst of timers is given back once
// they fired. The rebuild copies what is left, which is amortized over the
// removals since the peak.
func (s *Service) compact() {
	if s.peak > 1024 && len(s.index) < s.peak/8 {
		index := make(map[string]*entry, len(s.index))
		for id, e := range s.index {
			index[id] = e
		}
		s.index, s.peak = index, len(index)
	}
}

// Len is the number of timers pending, of both domains.
func (s *Service) Len() int { return len(s.index) }

// Restore rebuilds the service from the mirrored timers, once the backend
// restored a checkpoint or savepoint, possibly taken at another
// parallelism: the backend holds the timers of exactly the key groups this
// subtask owns. It replaces whatever timers the service held, and leaves
// the backend's current key alone. It fails, leaving no timer, if the
// state holds an entry that is not a timer's.
func (s *Service) Restore() error {
	s.mirror = s.k.MapState(StateName)
	s.index = map[string]*entry{}
	for d := range s.queues {
		s.queues[d] = nil
	}
	err := s.k.ScanMap(StateName, func(key, uk, _ []byte) error {
		d, ts, ns, err := decodeUserKey(uk)
		if err != nil {
			return fmt.Errorf("%w (key %q)", err, key)
		}
		s.buf = appendID(s.buf[:0], d, key, ns, ts)
		if _, ok := s.index[string(s.buf)]; ok {
			return nil
		}
		e := &entry{id: string(s.buf), ts: ts, kl: int32(len(key)), pos: int32(len(s.queues[d]))}
		s.index[e.id] = e
		s.queues[d] = append(s.queues[d], e)
		return nil
	})
	if err != nil {
		s.index = map[string]*entry{}
		for d := range s.queues {
			s.queues[d] = nil
		}
		return err
	}
	for d := range s.queues {
		s.queues[d].init()
	}
	s.peak = len(s.index)
	return nil
}
