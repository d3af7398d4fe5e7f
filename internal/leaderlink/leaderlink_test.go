package leaderlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/registration"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// world records what the link did and runs its calls when told to.
type world struct {
	log     []string
	calls   []func() // queued calls, run by run
	posts   []func() // answers for the loop
	ctxs    []context.Context
	answers map[string]error // by call kind: the error it answers with
	again   bool             // heartbeats ask to register again
}

func (w *world) Go(ctx context.Context, io func(context.Context)) {
	w.ctxs = append(w.ctxs, ctx)
	w.calls = append(w.calls, func() { io(ctx) })
}

func (w *world) Register(e registration.Register) func(context.Context) (registration.Registration, error) {
	w.log = append(w.log, "register "+e.Addr)
	return func(context.Context) (registration.Registration, error) {
		return registration.Registration{ID: "r1", JobManagerID: "jm-" + e.Addr, Interval: time.Second, Timeout: 3 * time.Second}, w.answers["register"]
	}
}

func (w *world) Heartbeat(e registration.Heartbeat) func(context.Context) (bool, error) {
	w.log = append(w.log, "heartbeat "+e.Registration)
	return func(context.Context) (bool, error) { return w.again, w.answers["heartbeat"] }
}

func (w *world) Fence(e registration.Fence) { w.log = append(w.log, "fence "+e.JobManagerID) }
func (w *world) CancelAll(reason string, keep []string) {
	w.log = append(w.log, fmt.Sprintf("cancel all but %v", keep))
}
func (w *world) Unregistered(reason string) { w.log = append(w.log, "unregistered") }

// settle runs the queued calls and their answers until none is left.
func (w *world) settle() {
	for len(w.calls) > 0 || len(w.posts) > 0 {
		if len(w.calls) > 0 {
			f := w.calls[0]
			w.calls = w.calls[1:]
			f()
			continue
		}
		f := w.posts[0]
		w.posts = w.posts[1:]
		f()
	}
}

func (w *world) took() string {
	s := strings.Join(w.log, "; ")
	w.log = nil
	return s
}

func newLink(t *testing.T) (*registration.Member, *Link, *world, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	w := &world{answers: map[string]error{}}
	sm := registration.New(c, 0)
	l := New(sm, Deps{Executor: w, Post: func(f func()) { w.posts = append(w.posts, f) }, JobManager: w, TaskManager: w, Logger: slog.New(slog.DiscardHandler)})
	return sm, l, w, c
}

// A leader appears: the link registers, fences on the answer, cancels
// what the JobManager did not keep and heartbeats at once; a failed registration is tried
// again after the retry delay.
func TestLinkRegistersAndHeartbeats(t *testing.T) {
	sm, l, w, c := newLink(t)
	w.answers["register"] = errors.New("refused")
	sm.LeaderChanged("jm1:1")
	l.Drain()
	w.settle()
	if got, want := w.took(), "register jm1:1"; got != want {
		t.Fatalf("took %q, want %q", got, want)
	}
	if next := sm.NextDeadline(); next.Sub(c.now) != registration.RetryDelay {
		t.Fatalf("next attempt in %v, want %v", next.Sub(c.now), registration.RetryDelay)
	}
	delete(w.answers, "register")
	c.now = sm.NextDeadline()
	sm.Tick()
	l.Drain()
	w.settle()
	if got, want := w.took(), "register jm1:1; fence jm-jm1:1; cancel all but []; heartbeat r1"; got != want {
		t.Fatalf("took %q, want %q", got, want)
	}
	// The JobManager no longer knows the registration: register again.
	w.again = true
	c.now = sm.NextDeadline()
	sm.Tick()
	l.Drain()
	w.settle()
	if got, want := w.took(), "heartbeat r1; unregistered"; got != want {
		t.Fatalf("took %q, want %q", got, want)
	}
}

// A leader change abandons the call to the old leader: its context ends,
// and its late answer changes nothing.
func TestLinkAbandonsTheCallToAnOldLeader(t *testing.T) {
	sm, l, w, _ := newLink(t)
	sm.LeaderChanged("jm1:1")
	l.Drain()
	if len(w.calls) != 1 {
		t.Fatalf("%d calls queued, want 1", len(w.calls))
	}
	old := w.calls[0]
	w.calls = nil
	sm.LeaderChanged("jm2:1")
	l.Drain()
	if w.ctxs[0].Err() == nil {
		t.Fatal("the call to the old leader was not abandoned")
	}
	old() // its answer comes all the same
	w.settle()
	if got := w.took(); !slices.Contains(strings.Split(got, "; "), "fence jm-jm2:1") || strings.Contains(got, "fence jm-jm1:1") {
		t.Fatalf("took %q: want a fence of the new leader only", got)
	}
}
