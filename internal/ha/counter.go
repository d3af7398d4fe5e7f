package ha

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdCounter hands out the checkpoint IDs of one job from an etcd key
// holding the last ID issued (decimal). Each ID is claimed by one fenced
// compare-and-swap transaction, so IDs are strictly increasing across
// goroutines, JobManager restarts and leader changes, and a deposed leader
// can claim none. An ID whose claim failed ambiguously (timeout) may be
// skipped; none is ever issued twice.
type EtcdCounter struct {
	cfg   Config
	key   string
	fence Fence
	mu    struct {
		sync.Mutex
		// last and modRev are the value and mod revision last seen; the
		// next claim is tried against them, so a single writer needs one
		// round trip per ID. modRev 0 means "key absent".
		last, modRev int64
	}
}

// NewEtcdCounter returns the counter of jobID, writing under fence (the
// zero Fence gives a counter that can only read).
func NewEtcdCounter(cfg Config, jobID string, fence Fence) (*EtcdCounter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	keys, err := NewKeys(cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	if err := checkName("job ID", jobID); err != nil {
		return nil, fmt.Errorf("ha: checkpoint counter: %w", err)
	}
	return &EtcdCounter{cfg: cfg, key: keys.Counter(jobID), fence: fence}, nil
}

// Key is the etcd key of the counter.
func (c *EtcdCounter) Key() string { return c.key }

// Next claims and returns a fresh checkpoint ID, one above the last issued
// (1 for a new job).
func (c *EtcdCounter) Next(ctx context.Context) (int64, error) {
	var id int64
	err := c.update(ctx, func(last int64) (int64, bool, error) {
		if last == math.MaxInt64 {
			return 0, false, fmt.Errorf("counter at its maximum %d", last)
		}
		id = last + 1
		return id, true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("ha: checkpoint counter %s: next: %w", c.key, err)
	}
	return id, nil
}

// SetIfHigher raises the last issued ID to v if it is lower, so that Next
// returns at least v+1: a job restored from checkpoint v continues at v+1.
func (c *EtcdCounter) SetIfHigher(ctx context.Context, v int64) error {
	err := c.update(ctx, func(last int64) (int64, bool, error) {
		return v, v > last, nil
	})
	if err != nil {
		return fmt.Errorf("ha: checkpoint counter %s: set if higher than %d: %w", c.key, v, err)
	}
	return nil
}

// Last returns the last ID issued, 0 if none.
func (c *EtcdCounter) Last(ctx context.Context) (int64, error) {
	ctx, cancel := c.cfg.bound(ctx)
	defer cancel()
	resp, err := c.cfg.Client.Get(ctx, c.key)
	if err != nil {
		return 0, fmt.Errorf("ha: checkpoint counter %s: get: %w", c.key, err)
	}
	last, _, err := c.parse(resp)
	if err != nil {
		return 0, fmt.Errorf("ha: checkpoint counter %s: %w", c.key, err)
	}
	return last, nil
}

// Shutdown deletes the counter when discard is set (the job reached a
// globally terminal state); otherwise the counter stays for the next
// leader.
func (c *EtcdCounter) Shutdown(ctx context.Context, discard bool) error {
	if !discard {
		return nil
	}
	ctx, cancel := c.cfg.bound(ctx)
	defer cancel()
	if _, _, err := fencedTxn(ctx, c.cfg.Client, c.fence, nil, []clientv3.Op{clientv3.OpDelete(c.key)}); err != nil {
		return fmt.Errorf("ha: checkpoint counter %s: delete: %w", c.key, err)
	}
	c.mu.Lock()
	c.mu.last, c.mu.modRev = 0, 0
	c.mu.Unlock()
	return nil
}

// update applies f to the last issued ID with compare-and-swap until it
// sticks; f returns the new value and whether to write it.
func (c *EtcdCounter) update(ctx context.Context, f func(last int64) (int64, bool, error)) error {
	ctx, cancel := c.cfg.bound(ctx)
	defer cancel()
	c.mu.Lock()
	last, modRev := c.mu.last, c.mu.modRev
	c.mu.Unlock()
	for {
		v, write, err := f(last)
		if err != nil {
			return err
		}
		if !write {
			// A value seen once is a lower bound: the counter never goes
			// down while the job lives.
			return nil
		}
		resp, ok, err := fencedTxn(ctx, c.cfg.Client, c.fence,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(c.key), "=", modRev)},
			[]clientv3.Op{clientv3.OpPut(c.key, strconv.FormatInt(v, 10))},
			clientv3.OpGet(c.key))
		if err != nil {
			return err
		}
		if ok {
			c.remember(v, resp.Header.Revision)
			return nil
		}
		// Someone else moved the counter: retry against what it holds now.
		last, modRev, err = c.parse((*clientv3.GetResponse)(resp.Responses[1].GetResponseRange()))
		if err != nil {
			return err
		}
		c.remember(last, modRev)
	}
}

// remember keeps the newest (value, revision) seen.
func (c *EtcdCounter) remember(last, modRev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if modRev > c.mu.modRev {
		c.mu.last, c.mu.modRev = last, modRev
	}
}

// parse reads the counter out of a range response over its key.
func (c *EtcdCounter) parse(resp *clientv3.GetResponse) (last, modRev int64, err error) {
	if len(resp.Kvs) == 0 {
		return 0, 0, nil
	}
	kv := resp.Kvs[0]
	last, err = strconv.ParseInt(string(kv.Value), 10, 64)
	if err != nil || last < 0 {
		return 0, 0, fmt.Errorf("corrupt value %q", kv.Value)
	}
	return last, kv.ModRevision, nil
}
