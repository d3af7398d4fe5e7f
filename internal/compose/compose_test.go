package compose

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestComposeCommand: the project's command names the project and its
// files, after $COMPOSE_CMD.
func TestComposeCommand(t *testing.T) {
	t.Setenv("COMPOSE_CMD", "echo compose-tool")
	p := New("/repo", "proj", filepath.Join("deploy", "a.yml"), filepath.Join("deploy", "b.yml"))
	out, err := p.Compose(context.Background(), nil, "ps", "-q", "svc")
	if err != nil {
		t.Fatal(err)
	}
	want := "compose-tool -p proj -f /repo/deploy/a.yml -f /repo/deploy/b.yml ps -q svc"
	if got := strings.TrimSpace(out); got != want {
		t.Fatalf("ran %q, want %q", got, want)
	}
	if _, err := p.Run(context.Background(), nil, "false"); err == nil || !strings.Contains(err.Error(), "false") {
		t.Fatalf("a failing command: %v", err)
	}
}

func TestWaitFor(t *testing.T) {
	calls := 0
	if err := WaitFor(context.Background(), 0, "nothing", func() (bool, string) { calls++; return true, "" }); err != nil || calls != 1 {
		t.Fatalf("done at once: %v after %d calls", err, calls)
	}
	err := WaitFor(context.Background(), 0, "the impossible", func() (bool, string) { return false, "still not" })
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "the impossible") || !strings.Contains(err.Error(), "still not") {
		t.Fatalf("timed out: %v", err)
	}
}
