package taskmanager

import (
	"context"
	"errors"
	"sync"

	"github.com/weirproject/weir/internal/ha"
)

// leaderSource tells where the JobManager leader is.
type leaderSource interface {
	Leader() (string, error)
}

// staticLeader is a fixed JobManager address (standalone).
type staticLeader string

func (l staticLeader) Leader() (string, error) { return string(l), nil }

// etcdLeader follows the leader elected in etcd.
type etcdLeader struct {
	mu   sync.Mutex
	addr string
}

var errNoLeader = errors.New("taskmanager: no jobmanager leader elected")

func (l *etcdLeader) Leader() (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addr == "" {
		return "", errNoLeader
	}
	return l.addr, nil
}

// follow keeps addr on the current leader until ctx ends.
func (l *etcdLeader) follow(ctx context.Context, cfg ha.Config) {
	keys, err := ha.NewKeys(cfg.ClusterID)
	if err != nil {
		return
	}
	for info := range ha.Observe(ctx, cfg.Client, keys.Leader()) {
		l.mu.Lock()
		l.addr = info.RPCAddr
		l.mu.Unlock()
	}
}
