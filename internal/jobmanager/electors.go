package jobmanager

import (
	"context"
	"fmt"

	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/kubeha"
)

// elector campaigns for the leadership of a cluster: on etcd or on the
// Kubernetes API server.
type elector interface {
	campaign(ctx context.Context, info ha.LeaderInfo) (leadership, error)
	close()
}

// leadership is one won election and the HA services its writes are
// fenced by.
type leadership interface {
	// Done is closed when the leadership is lost; Err then says why.
	Done() <-chan struct{}
	Err() error
	Resign(ctx context.Context) error
	services() (haServices, error)
	// fence describes the fence for logs.
	fence() string
}

func (s *Server) newElector() (elector, error) {
	switch s.cfg.HA {
	case "etcd":
		e, err := ha.NewElector(s.cfg.Etcd)
		if err != nil {
			return nil, err
		}
		return etcdElector{e: e, cfg: s.cfg.Etcd}, nil
	case "kubernetes":
		e, err := kubeha.NewElector(s.cfg.Kube)
		if err != nil {
			return nil, err
		}
		return kubeElector{e: e, cfg: s.cfg.Kube}, nil
	}
	return nil, fmt.Errorf("jobmanager: no leader election with high availability %q", s.cfg.HA)
}

type etcdElector struct {
	e   *ha.Elector
	cfg ha.Config
}

func (e etcdElector) campaign(ctx context.Context, info ha.LeaderInfo) (leadership, error) {
	l, err := e.e.Campaign(ctx, info)
	if err != nil {
		return nil, err
	}
	return etcdLeadership{Leadership: l, cfg: e.cfg}, nil
}

func (e etcdElector) close() { e.e.Close() }

type etcdLeadership struct {
	*ha.Leadership
	cfg ha.Config
}

func (l etcdLeadership) services() (haServices, error) {
	return newEtcdServices(l.cfg, l.Fence())
}

func (l etcdLeadership) fence() string {
	return fmt.Sprintf("etcd key %s at revision %d", l.Fence().Key, l.Fence().Rev)
}

type kubeElector struct {
	e   *kubeha.Elector
	cfg kubeha.Config
}

func (e kubeElector) campaign(ctx context.Context, info ha.LeaderInfo) (leadership, error) {
	l, err := e.e.Campaign(ctx, info)
	if err != nil {
		return nil, err
	}
	return kubeLeadership{Leadership: l, cfg: e.cfg}, nil
}

func (e kubeElector) close() { e.e.Close() }

type kubeLeadership struct {
	*kubeha.Leadership
	cfg kubeha.Config
}

func (l kubeLeadership) services() (haServices, error) {
	return newKubeServices(l.cfg, l.Fence())
}

func (l kubeLeadership) fence() string {
	return fmt.Sprintf("Lease %s/%s held by %s in term %d", l.cfg.Namespace, kubeha.NewNames(l.cfg.ClusterID).Lease(), l.Fence().Holder, l.Fence().Term)
}
