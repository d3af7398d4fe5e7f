package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestFailOnRequest: of the subtasks that poll, exactly one claims a
// failure request, fails, and notes which it was; the request is gone, so
// a restarted subtask does not fail again.
func TestFailOnRequest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fail"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = (&LoadSource{dir: dir, sub: i}).failOnRequest()
		}()
	}
	wg.Wait()
	failedSub := -1
	for i, err := range errs {
		if err != nil {
			if failedSub >= 0 {
				t.Fatalf("subtasks %d and %d both failed", failedSub, i)
			}
			failedSub = i
		}
	}
	if failedSub < 0 {
		t.Fatal("no subtask failed")
	}
	b, err := os.ReadFile(filepath.Join(dir, "failed-7"))
	if err != nil {
		t.Fatal(err)
	}
	var sub int
	var ns int64
	if _, err := fmt.Sscanf(string(b), "%d %d", &sub, &ns); err != nil || sub != failedSub || ns <= 0 {
		t.Fatalf("failed-7 = %q (%v), want subtask %d and a time", b, err, failedSub)
	}
	if err := (&LoadSource{dir: dir}).failOnRequest(); err != nil {
		t.Fatalf("failed again without a request: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "fail.*"))
	if _, err := os.Stat(filepath.Join(dir, "fail")); err == nil {
		left = append(left, "fail")
	}
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
