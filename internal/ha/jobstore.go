package ha

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// StoredJob is a submitted job as the job store holds it: the bytes the
// caller marshalled for its graph (the JobGraph proto) and for its status
// (nil if none was put).
type StoredJob struct {
	ID     string
	Graph  []byte
	Status []byte
}

// EtcdJobStore keeps the submitted job graphs of a cluster, one key per
// job, so that a new leader can recover every job. Writes are fenced. A
// graph is limited by etcd's request size (1.5 MiB by default).
type EtcdJobStore struct {
	cfg   Config
	keys  Keys
	fence Fence
}

// NewEtcdJobStore returns the job store of cfg.ClusterID, writing under
// fence (the zero Fence gives a store that can only read).
func NewEtcdJobStore(cfg Config, fence Fence) (*EtcdJobStore, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	keys, err := NewKeys(cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	return &EtcdJobStore{cfg: cfg, keys: keys, fence: fence}, nil
}

// Put stores (or replaces) the graph of jobID.
func (s *EtcdJobStore) Put(ctx context.Context, jobID string, graph []byte) error {
	if err := checkName("job ID", jobID); err != nil {
		return fmt.Errorf("ha: job store: put: %w", err)
	}
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	key := s.keys.Job(jobID)
	if _, _, err := fencedTxn(ctx, s.cfg.Client, s.fence, nil, []clientv3.Op{clientv3.OpPut(key, string(graph))}); err != nil {
		return fmt.Errorf("ha: job store: put %s (%d bytes): %w", key, len(graph), err)
	}
	return nil
}

// PutStatus stores (or replaces) the status record of jobID.
func (s *EtcdJobStore) PutStatus(ctx context.Context, jobID string, status []byte) error {
	if err := checkName("job ID", jobID); err != nil {
		return fmt.Errorf("ha: job store: put status: %w", err)
	}
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	key := s.keys.JobStatus(jobID)
	if _, _, err := fencedTxn(ctx, s.cfg.Client, s.fence, nil, []clientv3.Op{clientv3.OpPut(key, string(status))}); err != nil {
		return fmt.Errorf("ha: job store: put %s: %w", key, err)
	}
	return nil
}

// Delete removes the graph and status of jobID; deleting an absent job is
// no error.
func (s *EtcdJobStore) Delete(ctx context.Context, jobID string) error {
	if err := checkName("job ID", jobID); err != nil {
		return fmt.Errorf("ha: job store: delete: %w", err)
	}
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	key := s.keys.Job(jobID)
	ops := []clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(s.keys.JobStatus(jobID))}
	if _, _, err := fencedTxn(ctx, s.cfg.Client, s.fence, nil, ops); err != nil {
		return fmt.Errorf("ha: job store: delete %s: %w", key, err)
	}
	return nil
}

// Get returns the graph of jobID, if stored.
func (s *EtcdJobStore) Get(ctx context.Context, jobID string) ([]byte, bool, error) {
	if err := checkName("job ID", jobID); err != nil {
		return nil, false, fmt.Errorf("ha: job store: get: %w", err)
	}
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	key := s.keys.Job(jobID)
	resp, err := s.cfg.Client.Get(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("ha: job store: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

// List returns every stored job, ordered by ID.
func (s *EtcdJobStore) List(ctx context.Context) ([]StoredJob, error) {
	ctx, cancel := s.cfg.bound(ctx)
	defer cancel()
	resp, err := s.cfg.Client.Get(ctx, s.keys.Jobs(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("ha: job store: list %s: %w", s.keys.Jobs(), err)
	}
	// Both prefixes at one revision, so a status never outlives its graph.
	st, err := s.cfg.Client.Get(ctx, s.keys.JobStatuses(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision))
	if err != nil {
		return nil, fmt.Errorf("ha: job store: list %s: %w", s.keys.JobStatuses(), err)
	}
	status := make(map[string][]byte, len(st.Kvs))
	for _, kv := range st.Kvs {
		id, _ := trimPrefix(kv.Key, s.keys.JobStatuses())
		status[id] = kv.Value
	}
	out := make([]StoredJob, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, _ := trimPrefix(kv.Key, s.keys.Jobs())
		out = append(out, StoredJob{ID: id, Graph: kv.Value, Status: status[id]})
	}
	return out, nil
}
