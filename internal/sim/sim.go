package sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/scheduler"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Result is the outcome of one run.
type Result struct {
	Seed uint64
	// Job describes the job the seed drew.
	Job string
	// Steps is the number of events run; Elapsed the simulated time.
	Steps   int
	Elapsed time.Duration
	// Faults counts the faults injected by kind.
	Faults map[string]int
	// Checkpoints completed, and the job's end (zero while it runs).
	Checkpoints int
	End         weirv1.JobState
	// Hash identifies the run's whole trace: a replay has the same.
	Hash uint64
	// Err is the first invariant violated; nil when none was.
	Err error
	// Trace is the end of the trace (all of it with Config.Trace).
	Trace string
}

// simulation is one run's cluster.
type simulation struct {
	// jm is the leader; jms every JobManager by address.
	jm       *jobManager
	jms      map[string]*jobManager
	ha       *haStore
	tms      map[string]*taskManager
	vertices map[string]*vertex
	bounded  bool
	// strays are attempts running on a registered TaskManager that the job
	// does not have as current, with when they were first seen.
	strays map[string]time.Time
	// commits is the output each sink subtask committed, by attempt
	// (vertex/index); committedTo is each attempt's newest commit.
	commits     map[string][]commitSpan
	committedTo map[string]int64
}

// haStore is what the JobManagers share through etcd: the job graph, the
// completed checkpoints, the checkpoint ID counter, and whether the job
// ended for good (its HA data removed).
type haStore struct {
	graph   *weirv1.JobGraph
	store   []completed
	counter int64
	ended   weirv1.JobState
	// attempts is the leader's record of the current attempts, written
	// before it deploys them: what the next leader adopts.
	attempts []scheduler.Placed
}

// strayBound is how long an attempt may run that no job has (a deploy
// whose answer was lost, say) before reconciliation must have cancelled
// it: a heartbeat to report it, a cancel to stop it, with room for a slow
// message each way.
const strayBound = 2*heartbeatInterval + 2*rpcTimeout + 5*time.Second

// Run runs one simulation.
func Run(cfg Config) Result {
	cfg = cfg.withDefaults()
	w := newWorld(cfg)
	g, vs, bounded := w.jobShape()
	sim := &simulation{
		tms: map[string]*taskManager{}, vertices: vs, bounded: bounded, strays: map[string]time.Time{},
		jms: map[string]*jobManager{}, ha: &haStore{graph: g}, commits: map[string][]commitSpan{}, committedTo: map[string]int64{},
	}
	w.sim = sim
	sim.jm = newJobManager(w, "jm1", g, nil, nil)
	sim.jms["jm1"] = sim.jm
	desc := describe(g, bounded)
	w.logf("job: %s", desc)

	for i := range cfg.TaskManagers {
		id := fmt.Sprintf("tm%d", i+1)
		tm := &taskManager{w: w, id: id, slots: cfg.Slots}
		sim.tms[id] = tm
		tm.start()
	}
	w.after(heartbeatInterval, "heartbeat check", sim.jm.checkHeartbeats)
	w.after(100*time.Millisecond, "nemesis", w.nemesis)
	w.client(g)
	w.at(epoch.Add(cfg.FaultTime), "faults stop", w.stopFaults)
	deadline := epoch.Add(cfg.FaultTime + cfg.Liveness)
	w.run(deadline, func() { w.check(deadline) })
	if w.failure == nil && !w.done() {
		if bounded {
			w.fail("liveness: the bounded job did not end within %s after the faults stopped: %s", cfg.Liveness, sim.jm.sched.State().FlinkName())
		} else {
			w.fail("liveness: no checkpoint completed within %s after the faults stopped (job %s)", cfg.Liveness, sim.jm.sched.State().FlinkName())
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(sim.jms)) {
		sim.jms[addr].deposed = true
		sim.jms[addr].drv.Close()
	}
	w.endProcs()
	return Result{
		Seed: cfg.Seed, Job: desc, Steps: w.steps, Elapsed: w.now().Sub(epoch), Faults: w.faults,
		Checkpoints: completions(sim), End: sim.ended(), Hash: w.hash, Err: w.failure, Trace: w.tail(traceLines(cfg)),
	}
}

func traceLines(cfg Config) int {
	if cfg.Trace {
		return 1 << 30
	}
	return 120
}

func completions(s *simulation) int {
	n := 0
	for _, jm := range s.jms {
		n += jm.completions
	}
	return n
}

// ended is the job's end: for good (its HA data gone), or as its last
// leader saw it.
func (s *simulation) ended() weirv1.JobState {
	if s.ha.ended != 0 {
		return s.ha.ended
	}
	return s.jm.ended
}

func describe(g *weirv1.JobGraph, bounded bool) string {
	s := "unbounded"
	if bounded {
		s = "bounded"
	}
	for _, v := range g.GetVertices() {
		s += fmt.Sprintf(" %s×%d", v.GetName(), v.GetParallelism())
		if len(v.GetInputs()) > 0 {
			switch v.GetInputs()[0].GetPartitioner() {
			case weirv1.Partitioner_PARTITIONER_FORWARD:
				s += "(fwd)"
			case weirv1.Partitioner_PARTITIONER_BROADCAST:
				s += "(bc)"
			}
		}
	}
	if g.GetCheckpointing().GetUnaligned() {
		s += " unaligned"
	}
	return s
}

func (s *simulation) sortedTMs() []*taskManager {
	out := make([]*taskManager, 0, len(s.tms))
	for _, id := range slices.Sorted(maps.Keys(s.tms)) {
		out = append(out, s.tms[id])
	}
	return out
}

// done reports whether the run reached what liveness asks, after the
// faults stopped: the bounded job ended, or the unbounded one completed a
// checkpoint, with no stray attempt left.
func (w *world) done() bool {
	jm := w.sim.jm
	if w.faulty() || len(w.sim.strays) > 0 || jm.graphs.Lagging() {
		return false
	}
	end := w.sim.ended()
	if jm.cancelled && end == weirv1.JobState_JOB_STATE_CANCELED {
		return true
	}
	if w.sim.bounded || end == weirv1.JobState_JOB_STATE_FINISHED {
		// An unbounded job finishes when a client stopped it with a
		// savepoint.
		return end == weirv1.JobState_JOB_STATE_FINISHED
	}
	return jm.lastCompletion.After(w.quiet)
}

// started checks an attempt that begins to run: the JobManager must not
// have taken it as cancelled on its TaskManager's word.
func (s *simulation) started(tm string, a *weirv1.ExecutionAttemptID) {
	if on, ok := s.jm.takenAsStopped[a.Key()]; ok && on == tm {
		s.jm.w.fail("%s started on %s after the JobManager took it as cancelled there: a zombie nobody will stop", a.Key(), tm)
	}
}

// broken fails the consumer of a data channel a partition cut.
func (s *simulation) broken(tm, channel string) {
	t := s.tms[tm]
	_, key, _ := strings.Cut(channel, " → ")
	if sub := t.tasks[key]; sub != nil && !sub.stopping {
		t.fail(sub, "input channel broken: "+channel)
	}
}

// committed records a sink's commit of epoch id, the output between the
// attempt's previous commit (or the checkpoint it restored, restored) and
// checkpoint id. Two attempts of one sink subtask must never commit
// overlapping output: the same epoch twice, or an epoch past the
// checkpoint another attempt restored from and committed beyond (a
// repeated notification to one attempt is harmless).
func (s *simulation) committed(tm string, a *weirv1.ExecutionAttemptID, id, restored int64) {
	s.jm.w.logf("%s: %s commits checkpoint %d", tm, a.Key(), id)
	subtask := fmt.Sprintf("%s/%d", a.GetVertex(), a.GetSubtaskIndex())
	lo, ok := s.committedTo[a.Key()]
	if !ok {
		lo = restored
	}
	if id <= lo {
		return // committed already
	}
	for _, o := range s.commits[subtask] {
		if o.attempt != a.Key() && lo < o.hi && o.lo < id {
			s.jm.w.fail("%s commits the output of checkpoints %d to %d, which %s committed %d to %d of: committed twice", a.Key(), lo, id, o.attempt, o.lo, o.hi)
			return
		}
	}
	s.commits[subtask] = append(s.commits[subtask], commitSpan{attempt: a.Key(), lo: lo, hi: id})
	s.committedTo[a.Key()] = id
}

// commitSpan is output an attempt committed: after checkpoint lo, up to
// checkpoint hi.
type commitSpan struct {
	attempt string
	lo, hi  int64
}

// check runs the invariants after every step.
func (w *world) check(deadline time.Time) {
	if w.failure != nil {
		return
	}
	sim, jm := w.sim, w.sim.jm
	// The slot pool never hands out more slots than a TaskManager has
	// (placements change only with the scheduler's effects).
	if jm.placed {
		jm.placed = false
		if jm.checkStored("step"); w.failure != nil {
			return
		}
		for tm, n := range jm.sched.View().SlotsHeld() {
			if r := jm.tms.Get(tm); r != nil && n > r.Slots {
				w.fail("%s holds %d slots of the job but has %d", tm, n, r.Slots)
				return
			}
		}
	}
	// An attempt running on a registered TaskManager that the job does not
	// have must be cancelled within strayBound.
	var strays []string
	where := map[string]string{}
	for id, tm := range sim.tms {
		if w.down[id] || jm.tms.Get(id) == nil {
			continue
		}
		for key, s := range tm.tasks {
			if !jm.sched.Holds(s.d.attempt, id) {
				strays = append(strays, key)
				where[key] = id
			}
		}
	}
	slices.Sort(strays)
	for _, key := range strays {
		since, ok := sim.strays[key]
		if !ok {
			sim.strays[key] = w.now()
			w.logf("%s runs %s, which the job does not have", where[key], key)
			continue
		}
		if w.now().Sub(since) > strayBound {
			w.fail("%s has run on %s for %s although the job does not have it: nothing reconciles it", key, where[key], w.now().Sub(since))
			return
		}
	}
	for key := range sim.strays {
		if !slices.Contains(strays, key) {
			delete(sim.strays, key)
		}
	}
	if w.checkFiles(); w.failure != nil {
		return
	}
	if w.checkRestorable(); w.failure != nil {
		return
	}
	if !w.faulty() && w.done() {
		w.q = nil // reached: nothing more to run
	}
	_ = deadline
}

// nemesis injects the faults, every 100 ms of simulated time.
func (w *world) nemesis() {
	if !w.faulty() {
		return
	}
	tick := 0.1 // seconds
	tms := w.sim.sortedTMs()
	pick := tms[w.rng.IntN(len(tms))]
	switch {
	case w.chance(w.cfg.CrashRate * tick):
		if !w.down[pick.id] {
			w.fault("crash", "%s crashes", pick.id)
			w.down[pick.id] = true
			w.incarnation[pick.id]++
			back := w.between(time.Second, 8*time.Second)
			id := pick.id
			w.after(back, "restart "+id, func() { w.restartTM(id) })
		}
	case w.chance(w.cfg.PartitionRate * tick):
		if !w.partitioned[pick.id] && !w.down[pick.id] {
			d := w.between(500*time.Millisecond, 10*time.Second)
			w.fault("partition", "%s cut off for %s", pick.id, d)
			w.partitioned[pick.id] = true
			id := pick.id
			w.after(d, "heal "+id, func() {
				if w.partitioned[id] {
					w.logf("%s reachable again", id)
					delete(w.partitioned, id)
				}
			})
		}
	case w.chance(w.cfg.TaskFailRate * tick):
		if !w.down[pick.id] && len(pick.tasks) > 0 {
			keys := slices.Sorted(maps.Keys(pick.tasks))
			s := pick.tasks[keys[w.rng.IntN(len(keys))]]
			if !s.stopping && !s.finished {
				w.fault("task-failure", "%s fails", s.d.attempt.Key())
				pick.fail(s, "injected failure")
			}
		}
	}
	w.after(100*time.Millisecond, "nemesis", w.nemesis)
}

// client schedules the client's calls at random moments of the fault
// phase: rescales, checkpoints, changes of the checkpoint interval, a
// cancel.
func (w *world) client(g *weirv1.JobGraph) {
	when := func() time.Time { return epoch.Add(w.between(0, w.cfg.FaultTime)) }
	for range w.rng.IntN(3) {
		pipeline := w.rng.IntN(pipelines(g))
		p := int32(1 + w.rng.IntN(3))
		w.at(when(), "client rescale", func() {
			jm := w.sim.jm // whoever leads then
			ng := proto.Clone(jm.sched.View().Graph).(*weirv1.JobGraph)
			for _, v := range ng.GetVertices() {
				if strings.HasSuffix(v.GetName(), strconv.Itoa(pipeline)) {
					v.Parallelism = p
				}
			}
			w.faults["client-rescale"]++
			jm.clientRescale(ng)
		})
	}
	for range w.rng.IntN(4) {
		w.at(when(), "client checkpoint", func() {
			w.faults["client-checkpoint"]++
			w.sim.jm.clientCheckpoint()
		})
	}
	for range w.rng.IntN(3) {
		interval := w.between(500*time.Millisecond, 2*time.Second).Round(100 * time.Millisecond)
		w.at(when(), "client checkpointing", func() {
			w.faults["client-checkpointing"]++
			w.sim.jm.clientCheckpointing(interval)
		})
	}
	if w.rng.Float64() < w.cfg.LeaderChangeP {
		w.at(when(), "leader change", w.leaderChange)
	} else if w.rng.IntN(10) == 0 {
		// (Not with a leader change: a job being cancelled is recovered
		// by the next leader, as in Flink, and runs on.)
		w.at(when(), "client cancel", func() {
			w.faults["client-cancel"]++
			w.sim.jm.clientCancel()
		})
	} else if w.rng.Float64() < w.cfg.StopP {
		w.at(when(), "client stop", func() {
			w.faults["client-stop"]++
			w.sim.jm.clientStop()
		})
	}
}

// leaderChange deposes the JobManager leader: another one takes over,
// recovers the job from the HA store (the graph, the latest completed
// checkpoint, the counter, the record of the attempts) and adopts the
// attempts the TaskManagers report as they follow it; what is not
// reported in time is redeployed.
func (w *world) leaderChange() {
	sim := w.sim
	if sim.ha.ended != 0 {
		return // the job's HA data is gone: no leader recovers it
	}
	old := sim.jm
	addr := fmt.Sprintf("jm%d", len(sim.jms)+1)
	w.fault("leader-change", "%s is deposed; %s leads", old.addr, addr)
	old.deposed = true
	old.drv.Close()
	var from *completed
	if n := len(sim.ha.store); n > 0 {
		c := sim.ha.store[n-1]
		from = &c
	}
	var adopt *scheduler.Adoption
	if len(sim.ha.attempts) > 0 {
		adopt = &scheduler.Adoption{Attempts: sim.ha.attempts, Window: heartbeatTimeout}
	}
	jm := newJobManager(w, addr, proto.Clone(sim.ha.graph).(*weirv1.JobGraph), from, adopt)
	jm.cancelled = old.cancelled
	sim.jms[addr], sim.jm = jm, jm
	for _, v := range sim.ha.graph.GetVertices() {
		sim.vertices[v.GetName()].parallelism = v.GetParallelism()
	}
	var retained []*weirv1.CheckpointMetadata
	for _, c := range sim.ha.store {
		retained = append(retained, c.md)
	}
	jm.drv.RebuildShared(retained)
	if from != nil {
		jm.restored(from)
	}
	w.after(heartbeatInterval, "heartbeat check", jm.checkHeartbeats)
	jm.sched.StartAdoption()
	jm.drain() // the adoption's deadline
	for _, tm := range sim.sortedTMs() {
		if !w.down[tm.id] {
			tm.member.LeaderChanged(addr)
			tm.step()
		}
	}
}

func pipelines(g *weirv1.JobGraph) int {
	n := 0
	for _, v := range g.GetVertices() {
		if len(v.GetInputs()) == 0 {
			n++
		}
	}
	return n
}

func (w *world) restartTM(id string) {
	if !w.down[id] {
		return
	}
	w.logf("%s restarts", id)
	delete(w.down, id)
	w.sim.tms[id].start()
}

// stopFaults ends the fault phase: the network heals and every crashed
// TaskManager comes back.
func (w *world) stopFaults() {
	w.quiet = w.now()
	w.logf("faults stop")
	clear(w.partitioned)
	for _, tm := range w.sim.sortedTMs() {
		w.restartTM(tm.id)
	}
}
