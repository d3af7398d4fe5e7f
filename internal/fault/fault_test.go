package fault_test

import (
	"errors"
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
