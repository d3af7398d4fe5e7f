// Package dirsync makes the directory fsyncs that concurrent goroutines of
// one process ask for share one another: the file sink's subtasks of a
// TaskManager each rename their part files into the same directory at
// every checkpoint, and one fsync of the directory makes all those renames
// durable, however many subtasks asked for it.
//
// It is group commit: a caller is answered by an fsync that started after
// it asked, so everything it did in the directory before asking is
// durable when Sync returns, and every caller that asked before an fsync
// started is answered by that one fsync.
package dirsync

import "sync"

// Group shares the fsyncs of each directory among its callers.
type Group struct {
	sync func(dir string) error

	mu   sync.Mutex
	dirs map[string]*dirState

	// onWait, when set, is called (under the lock) each time a caller
	// starts waiting for an fsync: tests wait on it instead of sleeping.
	onWait func(dir string)
}

type dirState struct {
	cond *sync.Cond
	// running is set while an fsync of the directory is under way.
	running bool
	// next is the round the callers that asked since the running fsync
	// started wait for; nil when nobody waits.
	next *round
}

type round struct {
	done bool
	err  error
}

// New returns a Group whose fsyncs call sync, which makes the directory's
// entries durable.
func New(sync func(dir string) error) *Group {
	return &Group{sync: sync, dirs: map[string]*dirState{}}
}

// Sync returns once an fsync of dir that started after Sync was called has
// ended, with that fsync's error. The caller that finds no fsync under way
// runs it on its own goroutine; the callers that arrive meanwhile wait for
// the next one, which the first of them to wake runs for them all.
func (g *Group) Sync(dir string) error {
	g.mu.Lock()
	d, ok := g.dirs[dir]
	if !ok {
		d = &dirState{cond: sync.NewCond(&g.mu)}
		g.dirs[dir] = d
	}
	r := d.next
	if r == nil {
		r = &round{}
		d.next = r
	}
	for d.running && !r.done {
		if g.onWait != nil {
			g.onWait(dir)
		}
		d.cond.Wait()
	}
	if r.done {
		err := r.err
		g.mu.Unlock()
		return err
	}
	// No fsync runs and r has not had one: r is still d.next, and this
	// caller runs its fsync.
	d.next, d.running = nil, true
	g.mu.Unlock()

	err := g.sync(dir)

	g.mu.Lock()
	r.done, r.err = true, err
	d.running = false
	if d.next == nil {
		// Nobody waits: forget the directory, so a process whose sinks
		// write to many directories over its life keeps no state for them.
		delete(g.dirs, dir)
	}
	d.cond.Broadcast()
	g.mu.Unlock()
	return err
}
