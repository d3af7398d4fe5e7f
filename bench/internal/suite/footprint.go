package suite

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/weirproject/weir/bench/internal/harness"
)

// X: idle memory of the shipped daemons and start-up time to a running job.
func runFootprint(e *Env, b *Bench) error {
	rounds := 3
	if e.Quick {
		rounds = 1
	}
	var jmRSS, tmRSS, startup, registered []float64
	for r := 0; r < rounds; r++ {
		start := time.Now()
		c, err := e.Cluster(fmt.Sprintf("x-%d", r), harness.Config{TaskManagers: 2, Slots: 2, Stock: true, NoWait: true})
		if err != nil {
			return err
		}
		err = func() error {
			if err := c.WaitTMs(e.Ctx, 2, 30*time.Second); err != nil {
				return err
			}
			registered = append(registered, float64(time.Since(start))/float64(time.Millisecond))
			spec := runningSumSpec("x-startup", "1s", filepath.Join(c.Dir(), "out"), 16)
			job, err := c.Submit(e.Ctx, spec)
			if err != nil {
				return err
			}
			if err := c.WaitRunning(e.Ctx, job, 30*time.Second); err != nil {
				return err
			}
			startup = append(startup, float64(time.Since(start))/float64(time.Millisecond))
			if err := c.Cancel(e.Ctx, job); err != nil {
				return err
			}
			return nil
		}()
		if err != nil {
			e.StopCluster(c)
			return err
		}
		// Idle RSS: a fresh cluster, after the daemons settled.
		if err := sleep(e, time.Second); err != nil {
			e.StopCluster(c)
			return err
		}
		e.StopCluster(c)
		c, err = e.Cluster(fmt.Sprintf("x-idle-%d", r), harness.Config{TaskManagers: 2, Slots: 2, Stock: true})
		if err != nil {
			return err
		}
		if err := sleep(e, 2*time.Second); err != nil {
			e.StopCluster(c)
			return err
		}
		if v, err := harness.RSS(c.JM.Pid()); err == nil {
			jmRSS = append(jmRSS, float64(v)/(1<<20))
		}
		for _, t := range c.TMs {
			if v, err := harness.RSS(t.Pid()); err == nil {
				tmRSS = append(tmRSS, float64(v)/(1<<20))
			}
		}
		e.StopCluster(c)
	}
	b.Add("idle JobManager RSS", "MiB", false, jmRSS)
	b.Add("idle TaskManager RSS (bin/taskmanager)", "MiB", false, tmRSS).Against("Flink TaskManager process size default", 1728, "MiB")
	b.Add("processes start → 2 TaskManagers registered", "ms", false, registered)
	b.Add("processes start → job RUNNING (all subtasks)", "ms", false, startup)
	b.Note("the JobManager and both TaskManagers start together; the job is the running-sum example, submitted over gRPC as soon as the TaskManagers registered; Flink's anchor is its default taskmanager.memory.process.size (1728m) and a start-up in seconds")
	return nil
}
