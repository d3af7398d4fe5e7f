package harness

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirproject/weir/internal/proc"
)

// HostBusy is the CPU time all CPUs spent not idle (nor waiting for I/O)
// since boot, from /proc/stat.
func HostBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var total int64
	for i, s := range f[1:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user
			break
		}
		total += v
	}
	return time.Duration(total) * time.Second / clockTick
}

// treeCPU is the CPU time of this process (pid 0) and every live child.
func treeCPU() map[int]time.Duration {
	m := map[int]time.Duration{0: SelfCPUTime()}
	for _, p := range proc.Live() {
		if c, err := CPUTime(p.Pid()); err == nil {
			m[p.Pid()] = c
		}
	}
	return m
}

// cpuDelta is the CPU our processes used between two treeCPU readings: a
// child that exited meanwhile counts nothing (its last interval is lost),
// one that started counts all it used.
func cpuDelta(prev, cur map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, c := range cur {
		d += c - prev[pid]
	}
	return d
}

// Interference samples, while it runs, how much CPU the rest of the host
// (processes this harness did not start) used: the benchmarks share the
// machine with whatever else runs on it.
type Interference struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	foreign time.Duration
	elapsed time.Duration
	max     float64
}

// StartInterference starts sampling every interval.
func StartInterference(interval time.Duration) *Interference {
	in := &Interference{stop: make(chan struct{})}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		prevAt, prevHost, prevOurs := time.Now(), HostBusy(), treeCPU()
		for {
			select {
			case <-in.stop:
				return
			case <-t.C:
			}
			at, host, ours := time.Now(), HostBusy(), treeCPU()
			// A child that exited in the interval takes its last CPU time
			// along: clamp at zero rather than count it as foreign.
			f := max(0, (host-prevHost)-cpuDelta(prevOurs, ours))
			el := at.Sub(prevAt)
			in.mu.Lock()
			in.foreign += f
			in.elapsed += el
			if c := f.Seconds() / el.Seconds(); c > in.max {
				in.max = c
			}
			in.mu.Unlock()
			prevAt, prevHost, prevOurs = at, host, ours
		}
	}()
	return in
}

// Stop ends sampling and returns the mean and peak CPU cores used by other
// processes.
func (in *Interference) Stop() (mean, peak float64) {
	close(in.stop)
	in.wg.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.elapsed == 0 {
		return 0, 0
	}
	return in.foreign.Seconds() / in.elapsed.Seconds(), in.max
}

// LoadAvg is the 1-minute load average.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
