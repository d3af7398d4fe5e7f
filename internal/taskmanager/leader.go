package taskmanager

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/kubeha"
)

// leaderSource tells where the JobManager leader is. It pushes every
// change to the registration driver, which follows a new leader at once
// instead of noticing it at its next poll.
type leaderSource interface {
	// follow sends the leader now and after every change (the zero
	// LeaderInfo while none is known). The channel is closed once ctx
	// ended, or earlier when nothing will change any more.
	follow(ctx context.Context) <-chan ha.LeaderInfo
}

// staticLeader is a fixed JobManager address (standalone).
type staticLeader string

func (l staticLeader) follow(context.Context) <-chan ha.LeaderInfo {
	ch := make(chan ha.LeaderInfo, 1)
	ch <- ha.LeaderInfo{RPCAddr: string(l)}
	close(ch)
	return ch
}

// etcdLeader follows the leader elected in etcd.
type etcdLeader struct {
	client *clientv3.Client
	keys   ha.Keys
}

func (l etcdLeader) follow(ctx context.Context) <-chan ha.LeaderInfo {
	return ha.Observe(ctx, l.client, l.keys.Leader())
}

// kubeLeader follows the leader elected on the Kubernetes API server.
type kubeLeader kubeha.Config

func (l kubeLeader) follow(ctx context.Context) <-chan ha.LeaderInfo {
	return kubeha.Observe(ctx, kubeha.Config(l))
}
