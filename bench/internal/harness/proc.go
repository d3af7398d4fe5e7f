// Package harness runs Weir the way it is deployed: a JobManager and
// TaskManagers (and etcd when HA is measured) as separate processes on
// loopback, driven over gRPC, observed through /metrics and /proc.
package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	killed  bool
}

// Start runs bin with args, its output going to logPath.
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
	p.killed = true
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Stop sends SIGTERM and waits up to grace, then SIGKILLs. It returns an
// error when the process had died before, did not exit cleanly, or had to
// be killed.
func (p *Proc) Stop(grace time.Duration) error {
	if p.killed {
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

// clockTick is USER_HZ, the unit of utime and stime in /proc (100 on every
// Linux architecture Go supports).
const clockTick = 100

// CPUTime is the CPU time (user + system, all threads) the process used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; fields start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// SelfCPUTime is this process's CPU time.
func SelfCPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RSS is the resident set size of the process in bytes.
func RSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}

// FreeAddr returns a loopback address with a port free right now.
func FreeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// LogPath names a log file in dir.
func LogPath(dir, name string) string { return filepath.Join(dir, name+".log") }
