package task

import (
	"sort"
	"sync"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// progress is how far the subtask got with each checkpoint it works on,
// for its TaskManager to report with heartbeats, so that an expired
// checkpoint can say where each subtask was stuck. The mailbox and the
// asynchronous part write it, the heartbeat reads it: it has its own lock.
type progress struct {
	mu sync.Mutex
	m  map[int64]*weirv1.CheckpointProgress
}

// advance records checkpoint id at phase. A phase never goes back (a late
// alignment update does not undo a snapshot), except that the barrier
// counts of an alignment grow within it.
func (p *progress) advance(id int64, phase weirv1.CheckpointPhase, received, channels int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[int64]*weirv1.CheckpointProgress{}
	}
	cur := p.m[id]
	if cur != nil && cur.GetPhase() > phase {
		return
	}
	p.m[id] = &weirv1.CheckpointProgress{CheckpointId: id, Phase: phase, BarriersReceived: int32(received), Channels: int32(channels)}
}

// done forgets checkpoint id: acknowledged, declined or aborted.
func (p *progress) done(id int64) {
	p.mu.Lock()
	delete(p.m, id)
	p.mu.Unlock()
}

// doneUpTo forgets id and every older checkpoint: a completed checkpoint
// subsumes them.
func (p *progress) doneUpTo(id int64) {
	p.mu.Lock()
	for k := range p.m {
		if k <= id {
			delete(p.m, k)
		}
	}
	p.mu.Unlock()
}

// CheckpointProgress returns the checkpoints the subtask works on, oldest
// first. Safe from any goroutine.
func (t *Task) CheckpointProgress() []*weirv1.CheckpointProgress {
	p := &t.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*weirv1.CheckpointProgress, 0, len(p.m))
	for _, c := range p.m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetCheckpointId() < out[j].GetCheckpointId() })
	return out
}
