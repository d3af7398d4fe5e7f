package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

// The nemeses: each injects one fault into the running cluster and returns
// the function that heals it. They act from the host (root): signals to a
// container's process, iptables in its network namespace (nsenter), its
// CPU quota, files written into its tmpfs through /proc/PID/root.

type heal func(context.Context) error

// kill SIGKILLs a service's container; healing starts it again (Docker
// does not restart a container it was told to kill).
func kill(ctx context.Context, c *cluster, service string) (heal, error) {
	if _, err := c.docker(ctx, service, "kill"); err != nil {
		return nil, fmt.Errorf("kill %s: %w", service, err)
	}
	return func(ctx context.Context) error {
		if _, err := c.composeOut(ctx, "start", service); err != nil {
			return fmt.Errorf("start %s: %w", service, err)
		}
		return nil
	}, nil
}

// killAll kills several services at once, and starts them all to heal.
func killAll(ctx context.Context, c *cluster, services ...string) (heal, error) {
	var heals []heal
	for _, s := range services {
		h, err := kill(ctx, c, s)
		if err != nil {
			return nil, errors.Join(err, healAll(heals)(ctx))
		}
		heals = append(heals, h)
	}
	return healAll(heals), nil
}

func healAll(heals []heal) heal {
	return func(ctx context.Context) error {
		var errs []error
		for _, h := range heals {
			errs = append(errs, h(ctx))
		}
		return errors.Join(errs...)
	}
}

// pause freezes a service's process with SIGSTOP: alive, connections
// open, silent. Healing sends SIGCONT.
func pause(ctx context.Context, c *cluster, service string) (heal, error) {
	pid, err := c.pid(ctx, service)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("SIGSTOP %s (pid %d): %w", service, pid, err)
	}
	return func(context.Context) error {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("SIGCONT %s (pid %d): %w", service, pid, err)
		}
		return nil
	}, nil
}

// partition drops every packet between service and each of peers, in
// service's network namespace, both ways: established connections hang
// as across a real partition rather than being reset. Healing deletes
// the rules (a container restarted meanwhile has a new namespace without
// them).
func partition(ctx context.Context, c *cluster, service string, peers ...string) (heal, error) {
	pid, err := c.pid(ctx, service)
	if err != nil {
		return nil, err
	}
	var rules [][]string
	for _, p := range peers {
		ip, err := c.ip(ctx, p)
		if err != nil {
			return nil, err
		}
		rules = append(rules, []string{"INPUT", "-s", ip, "-j", "DROP"}, []string{"OUTPUT", "-d", ip, "-j", "DROP"})
	}
	iptables := func(ctx context.Context, op string, rule []string) error {
		args := append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w", op}, rule...)
		_, err := c.run(ctx, nil, "nsenter", args...)
		return err
	}
	undo := func(ctx context.Context, n int) error {
		var errs []error
		for _, r := range rules[:n] {
			// A process gone took its namespace, and the rule, with it.
			if err := iptables(ctx, "-D", r); err != nil && processAlive(pid) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for i, r := range rules {
		if err := iptables(ctx, "-I", r); err != nil {
			return nil, errors.Join(fmt.Errorf("partition %s from %v: %w", service, peers, err), undo(ctx, i))
		}
	}
	return func(ctx context.Context) error { return undo(ctx, len(rules)) }, nil
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// throttle limits services to cpus of a core each (the CFS quota): they
// answer, slowly. Healing gives them every core again.
func throttle(ctx context.Context, c *cluster, cpus string, services ...string) (heal, error) {
	set := func(ctx context.Context, v string) error {
		for _, s := range services {
			if _, err := c.docker(ctx, s, "update", "--cpus", v); err != nil {
				return fmt.Errorf("limit %s to %s CPUs: %w", s, v, err)
			}
		}
		return nil
	}
	all := strconv.Itoa(runtime.NumCPU())
	if err := set(ctx, cpus); err != nil {
		return nil, errors.Join(err, set(ctx, all))
	}
	return func(ctx context.Context) error { return set(ctx, all) }, nil
}

// fillFile is the file fill writes; healing removes it.
const fillFile = ".weir-faults-fill"

// fill writes into dir of service's container (a size-limited tmpfs of the
// fault overlay) until the file system is full. Healing removes the file;
// a container restarted meanwhile has a fresh, empty tmpfs.
func fill(ctx context.Context, c *cluster, service, dir string) (heal, int64, error) {
	pid, err := c.pid(ctx, service)
	if err != nil {
		return nil, 0, err
	}
	path := filepath.Join(fmt.Sprintf("/proc/%d/root", pid), dir, fillFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("fill %s:%s: %w", service, dir, err)
	}
	zeros := make([]byte, 1<<20)
	var n int64
	for ctx.Err() == nil {
		w, err := f.Write(zeros)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("fill %s:%s: %w", service, dir, err)
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return nil, 0, fmt.Errorf("fill %s:%s: %w", service, dir, err)
	}
	return func(context.Context) error {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("free %s:%s: %w", service, dir, err)
		}
		return nil
	}, n, nil
}
