package fault_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/fault"
)

func TestPointOffByDefault(t *testing.T) {
	for _, p := range fault.Points {
		if err := fault.Point(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

func TestPointReturnsError(t *testing.T) {
	if !fault.Compiled {
		t.Skip("needs -tags failpoints")
	}
	if err := fault.Enable(fault.SinkBeforeCommit, `1*return("error")`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fault.Disable(fault.SinkBeforeCommit) })
	if err := fault.Point(fault.SinkBeforeCommit); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("first evaluation: %v, want ErrInjected", err)
	}
	if err := fault.Point(fault.SinkBeforeCommit); err != nil {
		t.Fatalf("second evaluation of a 1* term: %v, want nil", err)
	}
}

func TestEnableUnknownPoint(t *testing.T) {
	if !fault.Compiled {
		t.Skip("needs -tags failpoints")
	}
	if err := fault.Enable("noSuchPoint", `return("error")`); err == nil {
		t.Fatal("enabling an unknown point succeeded")
	}
}

// TestSleepCountedOnce: a "1*sleep" term logs one firing, and the
// evaluations after it none (tests count firings in the logs).
func TestSleepCountedOnce(t *testing.T) {
	if !fault.Compiled {
		t.Skip("needs -tags failpoints")
	}
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	if err := fault.Enable(fault.JMBetweenTriggers, `1*sleep(100)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fault.Disable(fault.JMBetweenTriggers) })
	for range 5 {
		if err := fault.Point(fault.JMBetweenTriggers); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "fault point fired"); n != 1 {
		t.Fatalf("%d firings logged, want 1:\n%s", n, logs.String())
	}
}
