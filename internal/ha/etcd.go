package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotLeader is returned (wrapped) by every fenced write whose leader no
// longer holds leadership, and by Leadership.Err once leadership is lost. A
// JobManager that sees it must stop acting as leader.
var ErrNotLeader = errors.New("ha: not the leader")

// Defaults of Config.
const (
	DefaultSessionTTL     = 10 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// Config is what the etcd-backed types share.
type Config struct {
	// Client is the etcd client. The caller creates and closes it; closing
	// it ends every leadership made through it.
	Client *clientv3.Client
	// ClusterID names the Weir cluster; every key lives under
	// /weir/<ClusterID>/. It must be non-empty, without '/' or spaces.
	ClusterID string
	// SessionTTL is the TTL of a leader's etcd lease: how long a leader that
	// cannot reach etcd may still believe it leads, and how long the
	// takeover after a crashed leader waits. Rounded up to whole seconds;
	// etcd may grant more (its minimum TTL derives from its election
	// timeout). Default DefaultSessionTTL.
	SessionTTL time.Duration
	// RequestTimeout bounds each operation, retries included, when the
	// caller's context allows longer (or has no deadline), so that a
	// missing etcd never hangs a caller. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger receives what callers cannot act on (skipped entries,
	// retries). Default: discard.
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	if c.Client == nil {
		return errors.New("ha: config: Client is nil")
	}
	if err := checkName("cluster ID", c.ClusterID); err != nil {
		return fmt.Errorf("ha: config: %w", err)
	}
	if c.SessionTTL < 0 || c.RequestTimeout < 0 {
		return errors.New("ha: config: negative SessionTTL or RequestTimeout")
	}
	return nil
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, err
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// bound limits ctx to the request timeout.
func (c Config) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.RequestTimeout)
}

// ttlSeconds rounds d up to whole seconds, at least one.
func ttlSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// checkName accepts a cluster or job ID usable as one key segment.
func checkName(what, s string) error {
	if s == "" || s == "." || s == ".." {
		return fmt.Errorf("invalid %s %q", what, s)
	}
	for _, r := range s {
		if r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("invalid %s %q: no '/', spaces or control characters", what, s)
		}
	}
	return nil
}

// Keys builds the etcd keys of one cluster; see the package documentation
// for the layout.
type Keys struct{ root string }

// NewKeys returns the keys of cluster clusterID.
func NewKeys(clusterID string) (Keys, error) {
	if err := checkName("cluster ID", clusterID); err != nil {
		return Keys{}, fmt.Errorf("ha: %w", err)
	}
	return Keys{root: "/weir/" + clusterID}, nil
}

// Root is the prefix of every key of the cluster, with a trailing '/'.
func (k Keys) Root() string { return k.root + "/" }

// Leader is the election prefix (no trailing '/'): each candidate holds
// Leader()+"/<lease-id-hex>", the one with the lowest create revision leads.
// Pass it to Observe and CurrentLeader.
func (k Keys) Leader() string { return k.root + "/leader" }

// Jobs is the prefix of the job store, with a trailing '/'.
func (k Keys) Jobs() string { return k.root + "/jobs/" }

// Job is the key holding the submitted job graph of jobID.
func (k Keys) Job(jobID string) string { return k.Jobs() + jobID }

// JobStatuses is the prefix of the jobs' status records, with a trailing
// '/'. They live beside Jobs, not under it, so listing jobs lists graphs.
func (k Keys) JobStatuses() string { return k.root + "/job-status/" }

// JobStatus is the key holding what a new leader must carry on for jobID
// besides its graph (restart count, submission time).
func (k Keys) JobStatus(jobID string) string { return k.JobStatuses() + jobID }

// Checkpoints is the prefix of all checkpoint keys of jobID, with a
// trailing '/'.
func (k Keys) Checkpoints(jobID string) string { return k.root + "/checkpoints/" + jobID + "/" }

// Counter is the key holding the last checkpoint ID issued for jobID.
func (k Keys) Counter(jobID string) string { return k.Checkpoints(jobID) + "counter" }

// Completed is the prefix of the completed-checkpoint store of jobID, with
// a trailing '/'.
func (k Keys) Completed(jobID string) string { return k.Checkpoints(jobID) + "completed/" }

// CompletedCheckpoint is the key of checkpoint id of jobID; the ID is
// zero-padded to 20 digits so that key order is ID order.
func (k Keys) CompletedCheckpoint(jobID string, id int64) string {
	return fmt.Sprintf("%s%020d", k.Completed(jobID), id)
}

// Fence is the condition every write of a leader carries: its leader key
// still exists with the create revision it got when elected. Once the key
// is gone (resigned, lease expired or revoked) no write made under the
// fence can apply, however late it reaches etcd.
type Fence struct {
	Key string
	Rev int64
}

// IsZero reports whether f is the zero fence, under which every write
// fails with ErrNotLeader (for readers that never write).
func (f Fence) IsZero() bool { return f.Key == "" || f.Rev == 0 }

// Cmp is the etcd comparison that holds while f's leadership lasts.
func (f Fence) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Rev)
}

// fencedTxn commits one transaction: If(fence, cmps...) Then(then...)
// Else(get fence key, els...). It returns whether then applied, and
// otherwise the response whose Responses[1:] answer els. A failed fence is
// an error wrapping ErrNotLeader; a failed cmp is not an error.
func fencedTxn(ctx context.Context, c *clientv3.Client, f Fence, cmps []clientv3.Cmp, then []clientv3.Op, els ...clientv3.Op) (*clientv3.TxnResponse, bool, error) {
	if f.IsZero() {
		return nil, false, fmt.Errorf("%w: no leadership fence", ErrNotLeader)
	}
	resp, err := c.Txn(ctx).
		If(append([]clientv3.Cmp{f.Cmp()}, cmps...)...).
		Then(then...).
		Else(append([]clientv3.Op{clientv3.OpGet(f.Key)}, els...)...).
		Commit()
	if err != nil {
		return nil, false, fmt.Errorf("etcd txn: %w", err)
	}
	if resp.Succeeded {
		return resp, true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 || kvs[0].CreateRevision != f.Rev {
		return nil, false, fmt.Errorf("%w: leader key %s (revision %d) is gone", ErrNotLeader, f.Key, f.Rev)
	}
	return resp, false, nil
}

// trimPrefix returns key without prefix and whether it had it.
func trimPrefix(key []byte, prefix string) (string, bool) {
	return strings.CutPrefix(string(key), prefix)
}
