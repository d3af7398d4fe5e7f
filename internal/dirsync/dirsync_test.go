package dirsync

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/poll"
)

// fsyncs is a sync function whose calls block until the test answers them.
type fsyncs struct {
	started chan string
	answer  chan error
}

func newFsyncs() *fsyncs {
	return &fsyncs{started: make(chan string, 16), answer: make(chan error)}
}

func (f *fsyncs) sync(dir string) error {
	f.started <- dir
	return <-f.answer
}

func none[T any](t *testing.T, c <-chan T, what string) {
	t.Helper()
	select {
	case v := <-c:
		t.Fatalf("unexpected %s: %v", what, v)
	default:
	}
}

func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	return poll.Recv(t, c, 10*time.Second, what)
}

// call runs g.Sync(dir) on its own goroutine and delivers its result.
func call(g *Group, dir string) <-chan error {
	c := make(chan error, 1)
	go func() { c <- g.Sync(dir) }()
	return c
}

func TestCallersDuringAnFsyncShareTheNextOne(t *testing.T) {
	f := newFsyncs()
	g := New(f.sync)
	waits := make(chan string, 16)
	g.onWait = func(dir string) { waits <- dir }

	errFirst, errSecond := errors.New("first"), errors.New("second")
	a := call(g, "d")
	recv(t, f.started, "the first fsync")
	// b and c ask while a's fsync runs: their renames may have come after
	// it started, so its answer is not theirs.
	b, c := call(g, "d"), call(g, "d")
	recv(t, waits, "b to wait")
	recv(t, waits, "c to wait")
	none(t, f.started, "fsync while one runs")

	f.answer <- errFirst
	if err := recv(t, a, "a's answer"); !errors.Is(err, errFirst) {
		t.Fatalf("a got %v, want the first fsync's error", err)
	}
	recv(t, f.started, "the second fsync")
	none(t, b, "b's answer before its fsync ended")
	none(t, c, "c's answer before its fsync ended")
	f.answer <- errSecond
	for name, ch := range map[string]<-chan error{"b": b, "c": c} {
		if err := recv(t, ch, name+"'s answer"); !errors.Is(err, errSecond) {
			t.Fatalf("%s got %v, want the second fsync's error", name, err)
		}
	}
	none(t, f.started, "a third fsync")

	// The group is idle again: the next caller runs its own fsync.
	d := call(g, "d")
	recv(t, f.started, "a fresh fsync")
	f.answer <- nil
	if err := recv(t, d, "d's answer"); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.dirs) != 0 {
		t.Fatalf("idle group keeps %d directories", len(g.dirs))
	}
}

func TestDirectoriesDoNotShare(t *testing.T) {
	f := newFsyncs()
	g := New(f.sync)
	a := call(g, "a")
	recv(t, f.started, "a's fsync")
	b := call(g, "b")
	if dir := recv(t, f.started, "b's fsync"); dir != "b" {
		t.Fatalf("second fsync of %q, want b", dir)
	}
	f.answer <- nil
	f.answer <- nil
	recv(t, a, "a's answer")
	recv(t, b, "b's answer")
}

// TestManyCallersOfARealDirectory runs concurrent callers against real
// fsyncs: every caller is answered, and no more fsyncs run than callers.
func TestManyCallersOfARealDirectory(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	n := 0
	g := New(func(dir string) error {
		mu.Lock()
		n++
		mu.Unlock()
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	})
	const callers = 32
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i%26))+string(rune('0'+i/26))), nil, 0o644); err != nil {
				errs <- err
				return
			}
			errs <- g.Sync(dir)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 1 || n > callers {
		t.Fatalf("%d fsyncs for %d callers", n, callers)
	}
	t.Logf("%d callers, %d fsyncs", callers, n)
}
