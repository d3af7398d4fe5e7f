// Package proc starts and stops the daemons of a test cluster as child
// processes: the end-to-end tests and the benchmark harness both run
// Weir this way, as it is deployed. Each child writes to its own log,
// runs in its own process group, and is tracked until it exits, so a
// harness that is interrupted can take its children along (KillAll).
package proc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process.
type Proc struct {
	Name    string
	Cmd     *exec.Cmd
	Log     string
	Started time.Time
	done    chan struct{}
	err     error

	mu sync.Mutex
	// ended: the test meant the process to end (a kill, or a fault point
	// it set to crash it); Stop then only waits for it.
	ended bool
}

// Start runs bin with args and env added to this process's environment,
// its output going to logPath.
func Start(name, bin, logPath string, env []string, args ...string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// Own process group: an interrupted harness can take its children along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	track(p)
	go func() {
		p.err = cmd.Wait()
		f.Close()
		untrack(p)
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process exited; valid once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the process ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Proc) Kill() {
	p.Ended()
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Ended records that the process ends, or ended, as the test meant it
// to (a fault point it set crashes it): Stop does not count that as a
// failure.
func (p *Proc) Ended() {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
}

// Meant reports whether the test meant the process to end (Kill, Ended).
func (p *Proc) Meant() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// Stop sends SIGTERM and waits up to grace, then SIGKILLs. It returns an
// error when the process had died before (unless the test meant it to),
// did not exit cleanly, or had to be killed: a daemon that hangs or dies
// badly at shutdown is a bug.
func (p *Proc) Stop(grace time.Duration) error {
	if p.Meant() {
		<-p.done
		return nil
	}
	if p.Exited() {
		return fmt.Errorf("%s exited before shutdown: %v", p.Name, p.err)
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s did not exit cleanly on SIGTERM: %v", p.Name, p.err)
		}
		return nil
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s still running %v after SIGTERM (killed)", p.Name, grace)
	}
}

// Tail returns the last n bytes of the log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// LogField returns the value of the first key=value in the log.
func (p *Proc) LogField(key string) string {
	b, _ := os.ReadFile(p.Log)
	i := bytes.Index(b, []byte(key+"="))
	if i < 0 {
		return ""
	}
	v := b[i+len(key)+1:]
	if j := bytes.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(string(v), `"`)
}

// live holds every child still running, so a harness can stop them all
// when it is interrupted or a benchmark panics.
var live struct {
	sync.Mutex
	procs map[*Proc]bool
}

func track(p *Proc) {
	live.Lock()
	defer live.Unlock()
	if live.procs == nil {
		live.procs = map[*Proc]bool{}
	}
	live.procs[p] = true
}

func untrack(p *Proc) {
	live.Lock()
	defer live.Unlock()
	delete(live.procs, p)
}

// Live lists the children still running.
func Live() []*Proc {
	live.Lock()
	defer live.Unlock()
	ps := make([]*Proc, 0, len(live.procs))
	for p := range live.procs {
		ps = append(ps, p)
	}
	return ps
}

// KillAll SIGKILLs every child started here that still runs, except
// those in keep, and waits for them.
func KillAll(keep ...*Proc) {
	var ps []*Proc
outer:
	for _, p := range Live() {
		for _, k := range keep {
			if k == p {
				continue outer
			}
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.Ended()
		_ = syscall.Kill(p.Pid(), syscall.SIGKILL)
	}
	for _, p := range ps {
		<-p.done
	}
}
