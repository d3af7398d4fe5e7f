// Package harness runs Weir the way it is deployed: a JobManager and
// TaskManagers (and etcd when HA is measured) as separate processes on
// loopback, driven over gRPC, observed through /metrics and /proc.
package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weirproject/weir/internal/freeport"
	"github.com/weirproject/weir/internal/proc"
)

// Proc is one child process (internal/proc, shared with the end-to-end
// tests).
type Proc = proc.Proc

// Start runs bin with args, its output going to logPath.
func Start(name, bin, logPath string, env []string, args ...string) (*Proc, error) {
	return proc.Start(name, bin, logPath, env, args...)
}

// KillAll SIGKILLs every child this harness started that still runs,
// except those in keep.
func KillAll(keep ...*Proc) { proc.KillAll(keep...) }

// Live counts the children still running.
func Live() int { return len(proc.Live()) }

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

// FreeAddr returns a loopback address with a port free right now, below
// the kernel's ephemeral range, so no outgoing connection takes it before
// the daemon binds it.
func FreeAddr() string {
	addr, err := freeport.Pick()
	if err != nil {
		panic(err)
	}
	return addr
}

// LogPath names a log file in dir.
func LogPath(dir, name string) string { return filepath.Join(dir, name+".log") }
