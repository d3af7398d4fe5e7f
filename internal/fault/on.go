//go:build failpoints

package fault

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"syscall"
	"time"

	gofail "go.etcd.io/gofail/runtime"
)

// Compiled says whether fault points are compiled in (the failpoints tag).
const Compiled = true

var points = map[string]*gofail.Failpoint{}

func init() {
	// Registering enables the points GOFAIL_FAILPOINTS names.
	for _, name := range append(slices.Clone(Points), Others...) {
		points[name] = gofail.NewFailpoint(name)
	}
}

// minCountedSleep is the shortest evaluation logged as a sleep that fired.
const minCountedSleep = 80 * time.Millisecond

// Point evaluates the fault point name: it may sleep, kill the process,
// or return an error wrapping ErrInjected.
func Point(name string) error {
	fp := points[name]
	if fp == nil {
		panic("fault: unknown fault point " + name)
	}
	start := time.Now()
	v, err := fp.Acquire()
	if err != nil {
		// Disabled, or a sleep that already happened: gofail returns no
		// value for a sleep, so the time it took tells (its term counter
		// cannot: gofail reads it without a lock). An evaluation otherwise
		// takes nanoseconds, but a loaded machine deschedules a goroutine
		// for tens of milliseconds: only sleeps of 80 ms or more are told
		// apart, and fault tests sleep 100 ms and longer.
		if d := time.Since(start); d >= minCountedSleep {
			slog.Warn("fault point fired: delayed", "fault_point", name, "delay", d)
		}
		return nil
	}
	if v == "crash" {
		slog.Error("fault point fired: crashing", "fault_point", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	slog.Warn("fault point fired: failing", "fault_point", name, "value", v)
	return fmt.Errorf("%w at %s (%v)", ErrInjected, name, v)
}

// Enable sets a fault point's terms (gofail syntax), e.g. `1*return("error")`.
func Enable(name, terms string) error {
	if err := gofail.Enable(name, terms); err != nil {
		return fmt.Errorf("fault: enable %s=%s: %w", name, terms, err)
	}
	return nil
}

// Disable turns a fault point off.
func Disable(name string) error {
	if err := gofail.Disable(name); err != nil && err != gofail.ErrDisabled {
		return fmt.Errorf("fault: disable %s: %w", name, err)
	}
	return nil
}
