package suite

import (
	"fmt"
	"path/filepath"

	"github.com/weirproject/weir/bench/internal/harness"
)

// certTaskManagers is how many TaskManager certificates the run's CA
// issues: more than any cluster on mutual TLS starts.
const certTaskManagers = 4

// Certs generates (once per run) the CA and certificates of the clusters
// that run with mutual TLS, in the work directory, and returns their
// directory.
func (e *Env) Certs() (string, error) {
	e.certsOnce.Do(func() {
		e.certsDir = filepath.Join(e.Work, "pki")
		e.certsErr = harness.GenerateCerts(e.certsDir, certTaskManagers)
	})
	return e.certsDir, e.certsErr
}

// TLSCluster starts a cluster as Cluster does, with every daemon and the
// harness's client on mutual TLS.
func (e *Env) TLSCluster(name string, cfg harness.Config) (*harness.Cluster, error) {
	if cfg.TaskManagers > certTaskManagers {
		return nil, fmt.Errorf("cluster %s: %d TaskManagers, certificates for %d", name, cfg.TaskManagers, certTaskManagers)
	}
	dir, err := e.Certs()
	if err != nil {
		return nil, err
	}
	cfg.TLS = dir
	return e.Cluster(name, cfg)
}
