package harness

import (
	"sync"
	"syscall"
)

// live holds every child still running, so the harness can stop them all
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

// KillAll SIGKILLs every child this harness started that still runs,
// except those in keep.
func KillAll(keep ...*Proc) {
	live.Lock()
	ps := make([]*Proc, 0, len(live.procs))
outer:
	for p := range live.procs {
		for _, k := range keep {
			if k == p {
				continue outer
			}
		}
		ps = append(ps, p)
	}
	live.Unlock()
	for _, p := range ps {
		_ = syscall.Kill(p.Pid(), syscall.SIGKILL)
	}
	for _, p := range ps {
		<-p.done
	}
}

// Live counts the children still running.
func Live() int {
	live.Lock()
	defer live.Unlock()
	return len(live.procs)
}
