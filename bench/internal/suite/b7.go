package suite

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
)

// etcdOps are etcd's own counters of what its clients asked for.
type etcdOps struct {
	txn, put, rng, del, proposals float64
	at                            time.Time
}

func readEtcd(e *Env, addr string) (etcdOps, error) {
	m, err := harness.Scrape(e.Ctx, addr)
	if err != nil {
		return etcdOps{}, err
	}
	kv := func(method string) float64 {
		return m.Sum("grpc_server_handled_total", map[string]string{"grpc_service": "etcdserverpb.KV", "grpc_method": method})
	}
	return etcdOps{
		txn: kv("Txn"), put: kv("Put"), rng: kv("Range"), del: kv("DeleteRange"),
		proposals: m.Sum("etcd_server_proposals_committed_total", nil),
		at:        time.Now(),
	}, nil
}

func (a etcdOps) sub(b etcdOps) etcdOps {
	return etcdOps{a.txn - b.txn, a.put - b.put, a.rng - b.rng, a.del - b.del, a.proposals - b.proposals, a.at}
}

// B7: what HA on etcd costs per checkpoint.
func runB7(e *Env, b *Bench) error {
	ep, err := e.Etcd()
	if err != nil {
		return err
	}
	c, err := e.Cluster("b7", harness.Config{TaskManagers: 2, Slots: 4, Etcd: ep, ClusterID: fmt.Sprintf("bench-b7-%d", time.Now().UnixNano())})
	if err != nil {
		return err
	}
	defer e.StopCluster(c)
	n := 300
	if e.Quick {
		n = 100
	}
	err = runJob(e, c, idleSpec("b7-ha", 8, 1024), func(job string) error {
		if _, _, err := closedLoop(e, c, job, 20); err != nil {
			return err
		}
		// What etcd does with no checkpoints (leases, leader election).
		i0, err := readEtcd(e, ep)
		if err != nil {
			return err
		}
		if err := sleep(e, 2*time.Second); err != nil {
			return err
		}
		i1, err := readEtcd(e, ep)
		if err != nil {
			return err
		}
		idle := i1.sub(i0)
		idleSecs := i1.at.Sub(i0.at).Seconds()

		jm0, _ := harness.CPUTime(c.JM.Pid())
		e0, err := readEtcd(e, ep)
		if err != nil {
			return err
		}
		lat, total, err := closedLoop(e, c, job, n)
		if err != nil {
			return err
		}
		e1, err := readEtcd(e, ep)
		if err != nil {
			return err
		}
		jm1, _ := harness.CPUTime(c.JM.Pid())
		d := e1.sub(e0)
		secs := e1.at.Sub(e0.at).Seconds()
		per := func(v, idleV float64) float64 { return (v - idleV/idleSecs*secs) / float64(n) }

		ms := make([]float64, len(lat))
		for i, l := range lat {
			ms[i] = float64(l) / float64(time.Millisecond)
		}
		p := b.Add("8 subtasks, etcd HA: trigger → completed (client)", "ms", false, ms)
		p.Against("etcd txn", float64(e.Floors.EtcdTxn)/float64(time.Millisecond), "ms")
		rate := float64(n) / total.Seconds()
		b.Add("8 subtasks, etcd HA: closed-loop rate", "ckpt/s", true, chunkRates(lat, 50)).With("overall_ckpt_per_s", rate)
		txn := per(d.txn, idle.txn)
		b.Add("etcd txns per checkpoint", "txn", false, []float64{txn})
		b.Add("etcd requests (txn+put+range+delete) per checkpoint", "req", false, []float64{per(d.txn+d.put+d.rng+d.del, idle.txn+idle.put+idle.rng+idle.del)})
		b.Add("etcd raft proposals (fsynced writes) per checkpoint", "prop", false, []float64{per(d.proposals, idle.proposals)})
		jmCPU := float64(jm1-jm0) / float64(time.Millisecond) / float64(n)
		b.Add("JobManager CPU per checkpoint", "ms", false, []float64{jmCPU}).With("jm_cpu_resolution_ms", 10.0/float64(n))
		if p2 := e.report.bench("B2"); p2 != nil {
			if sp := p2.Point("8 subtasks: trigger → completed (client)"); sp != nil {
				p.With("standalone_median_ms_from_B2", sp.Median)
			}
		}
		p.With("idle_etcd_requests_per_s", (idle.txn+idle.put+idle.rng+idle.del)/idleSecs)
		b.Goal("etcd txns per checkpoint", txn, "<=", 2, "txn")
		b.Goal("closed-loop checkpoints/s with etcd HA", rate, ">=", 100, "ckpt/s")
		return nil
	})
	if err != nil {
		return err
	}
	// The periodic scheduler at its minimum interval, with HA.
	err = runJob(e, c, periodicIdleSpec("b7-periodic", 8, 1024, "10ms"), func(job string) error {
		if err := sleep(e, time.Second); err != nil {
			return err
		}
		ws, err := sampleWindows(e, c, job, "state", 3, time.Second)
		if err != nil {
			return err
		}
		var r []float64
		for _, w := range ws {
			r = append(r, w.Checkpoints/w.Elapsed.Seconds())
		}
		b.Add("periodic every 10 ms, etcd HA: completed", "ckpt/s", true, r)
		return nil
	})
	if err != nil {
		return err
	}
	profileCheckpoints(e, b, "ha-8-subtasks", harness.Config{TaskManagers: 2, Slots: 4, Etcd: ep, ClusterID: fmt.Sprintf("bench-b7p-%d", time.Now().UnixNano())}, idleSpec("b7-profile", 8, 1024), 5*time.Second)
	b.Note("1 JobManager with --ha etcd (fenced counter, checkpoint store, leader lease), etcd single member in its own process; etcd counts from its grpc_server_handled_total (KV service) and etcd_server_proposals_committed_total, minus the idle rate measured just before; %d checkpoints one after the other", n)
	return nil
}

// periodicIdleSpec is idleSpec with periodic checkpoints.
func periodicIdleSpec(name string, n, stateBytes int, interval string) string {
	return fmt.Sprintf(`name: %s
checkpointing: {interval: %s, mode: exactly-once, timeout: 1m, retained: 1}
vertices:
  - {name: source, operator: idle-source, parallelism: %d, config: {state-bytes: %d}}
  - {name: state, operator: ballast, parallelism: %d, inputs: [{from: source, partition: hash}], config: {state-bytes: %d}}
`, name, interval, n/2, stateBytes, n/2, stateBytes)
}
