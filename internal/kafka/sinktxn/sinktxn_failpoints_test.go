//go:build failpoints

package sinktxn

import (
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScenariosCatchBugs proves the scenarios are a specification: with
// any of the mistakes earlier versions made put back (Reintroduce), at
// least one scenario must fail, by its expected output or by an invariant.
func TestScenariosCatchBugs(t *testing.T) {
	if f := flag.Lookup("rewrite"); f != nil && f.Value.String() == "true" {
		t.Skip("-rewrite must not write a buggy machine's output")
	}
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(Bugs)) {
		t.Run(name, func(t *testing.T) {
			undo := Reintroduce(Bugs[name])
			defer undo()
			var caught []string
			for _, path := range files {
				if msg := runScenario(path); msg != "" {
					caught = append(caught, filepath.Base(path))
					t.Logf("%s fails with %s:\n%s", filepath.Base(path), name, firstLines(msg, 12))
				}
			}
			if len(caught) == 0 {
				t.Fatalf("no scenario fails with bug %s reintroduced", name)
			}
		})
	}
}

// runScenario runs one scenario file and returns its failure, if any.
func runScenario(path string) string {
	r := &recorder{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h := newHarness()
		datadriven.RunTestAny(r, path, func(t testing.TB, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	}()
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed && r.msg == "" {
		return "failed"
	}
	return r.msg
}

// firstLines is s cut after n lines.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "") + "..."
}

// recorder is a testing.TB that records a failure instead of failing the
// test; Fatal ends the scenario's goroutine as testing.T's does.
type recorder struct {
	testing.TB // nil: only the methods below may be called
	mu         sync.Mutex
	failed     bool
	msg        string
}

func (r *recorder) Helper()             {}
func (r *recorder) Name() string        { return "scenario" }
func (r *recorder) Log(...any)          {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Skipped() bool       { return false }
func (r *recorder) Error(args ...any)   { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, args ...any) {
	r.fail(fmt.Sprintf(f, args...))
}
func (r *recorder) Fatal(args ...any) { r.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(f string, args ...any) {
	r.fail(fmt.Sprintf(f, args...))
	runtime.Goexit()
}
func (r *recorder) Fail()    { r.fail("") }
func (r *recorder) FailNow() { r.fail(""); runtime.Goexit() }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	if msg != "" {
		r.msg += msg + "\n"
	}
}
