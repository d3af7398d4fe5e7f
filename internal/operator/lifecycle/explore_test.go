package lifecycle

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weirproject/weir/operator/api/v1alpha1"
)

// exploreSeeds: make sim-operator runs many more.
var exploreSeeds = flag.Int("lifecycle.seeds", 3000, "seeds TestLifecycleExplored runs")

// TestLifecycleExplored drives the lifecycle through seeded random
// interleavings of what users do (spec changes to good, failing and
// stuck jobs, suspend and resume, savepoint nonces) and of faults (lost
// status writes, actions that fail, actions whose answer is lost after
// they took effect, submissions refused for a while, an unreachable
// JobManager), in each upgrade mode. After every round: at most one job
// runs, none while the resource is suspended, and a rolled-back spec is
// not submitted again as an upgrade. At every submission that is
// not a rollback (or stateless): the new job starts from the newest state
// of the job before it, so no committed output is repeated or lost. After the script, with faults off and a
// good spec, the resource converges to it. A failing seed replays bit
// for bit: go test -run TestLifecycleExplored/seed=N.
func TestLifecycleExplored(t *testing.T) {
	seeds := *exploreSeeds
	if testing.Short() {
		seeds = min(seeds, 300)
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { explore(t, uint64(seed)) })
	}
}

func explore(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	mode := []v1alpha1.UpgradeMode{v1alpha1.UpgradeSavepoint, v1alpha1.UpgradeLastState, v1alpha1.UpgradeStateless}[rng.IntN(3)]
	w := newWorld(t, mode, "v0")
	w.spec.InitialSavepointPath = "/sp/initial"
	w.spec.Rollback = &v1alpha1.RollbackSpec{Enabled: rng.IntN(3) > 0, Timeout: metav1.Duration{Duration: 4 * time.Second}}
	var trace []string
	w.jm.onSubmit = func(a Action, prev *modelJob) {
		if a.Reason == "rollback" || prev == nil || mode == v1alpha1.UpgradeStateless {
			return
		}
		if want := prev.stoppedAt(); a.RestorePath != want {
			t.Fatalf("seed %d: job %q submitted (%s) from %q, but the job before it (%q) stopped at %q\ntrace: %s\nlog: %s\nrounds:\n%s",
				seed, a.Spec.Job.Spec, a.Reason, a.RestorePath, prev.spec, want, strings.Join(trace, " "), strings.Join(w.jm.log, "; "), strings.Join(w.history, "\n"))
		}
	}
	version := 0
	for step := range 40 {
		var what string
		switch r := rng.IntN(20); {
		case r < 3:
			version++
			spec := fmt.Sprintf("v%d", version)
			switch rng.IntN(6) {
			case 0:
				spec += "-fail"
			case 1:
				spec += "-stuck"
			case 2:
				spec += "-bad"
			}
			w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec = spec })
			what = "spec=" + spec
		case r < 5:
			w.change(func(s *v1alpha1.WeirJobSpec) { s.Suspend = !s.Suspend })
			what = fmt.Sprintf("suspend=%t", w.spec.Suspend)
		case r < 6:
			w.change(func(s *v1alpha1.WeirJobSpec) { s.SavepointTriggerNonce++ })
			what = "nonce"
		case r < 8:
			w.loseWrite = true
			what = "lose-write"
		case r < 10:
			w.jm.failNow = []ActionKind{Submit, StopWithSavepoint, CancelKeepingState, Cancel, TriggerSavepoint}[rng.IntN(5)]
			what = "fail-" + string(w.jm.failNow)
		case r < 12:
			w.jm.failAfter = []ActionKind{Submit, StopWithSavepoint, CancelKeepingState, Cancel, TriggerSavepoint}[rng.IntN(5)]
			what = "lose-answer-" + string(w.jm.failAfter)
		case r < 13:
			w.jm.down = !w.jm.down
			what = fmt.Sprintf("down=%t", w.jm.down)
		case r < 14:
			w.jm.refuseNow = true
			what = "refuse-submit"
		default:
			what = "-"
		}
		trace = append(trace, fmt.Sprintf("%d:%s", step, what))
		w.round()
	}
	// Quiet: no faults, a good spec, not suspended.
	w.jm.down, w.jm.failNow, w.jm.failAfter, w.jm.refuseNow, w.loseWrite = false, None, None, false, false
	version++
	final := fmt.Sprintf("v%d", version)
	w.change(func(s *v1alpha1.WeirJobSpec) { s.Job.Spec, s.Suspend = final, false })
	for range 30 {
		w.round()
		if w.status.LifecycleState == v1alpha1.StateRunning && w.status.Upgrade == nil {
			break
		}
	}
	if j := w.current(); w.status.LifecycleState != v1alpha1.StateRunning || j == nil || j.spec != final || j.state != "RUNNING" {
		t.Fatalf("seed %d: did not converge to %s: %s, upgrade %+v, job %+v\ntrace: %s\nlog: %s\nrounds:\n%s",
			seed, final, w.status.LifecycleState, w.status.Upgrade, j, strings.Join(trace, " "), strings.Join(w.jm.log, "; "), strings.Join(w.history, "\n"))
	}
}
