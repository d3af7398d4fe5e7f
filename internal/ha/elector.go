package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Reasons a leadership ends or a campaign stops; Leadership.Err wraps one
// of them together with ErrNotLeader.
var (
	errResigned      = errors.New("resigned")
	errElectorClosed = errors.New("elector closed")
	errSessionLost   = errors.New("etcd session lost (lease expired or revoked, etcd unreachable for the TTL, or client closed)")
	errKeyDeleted    = errors.New("leader key deleted")
)

// LeaderInfo is what a JobManager publishes while it campaigns and leads:
// how TaskManagers and the CLI reach it. It is stored as JSON in its
// election key.
type LeaderInfo struct {
	ID       string `json:"id"`
	RPCAddr  string `json:"rpc_addr"`
	HTTPAddr string `json:"http_addr"`
}

// Elector runs leader elections among the JobManagers of one cluster. The
// election keys follow go.etcd.io/etcd/client/v3/concurrency.Election
// (prefix/<lease-id-hex>, lowest create revision leads), so etcdctl elect
// and concurrency.Election observe it too; campaigning is done here rather
// than by Election.Campaign because that one, when its context is
// cancelled, resigns with the client's own context and can block while
// etcd is unreachable.
type Elector struct {
	cfg  Config
	keys Keys

	root   context.Context // cancelled by Close, with errElectorClosed
	cancel context.CancelCauseFunc
	mu     struct {
		sync.Mutex
		closed bool
		wg     sync.WaitGroup // background goroutines: leadership monitors, lease revokes
	}
}

// NewElector returns an elector for cfg.ClusterID.
func NewElector(cfg Config) (*Elector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	keys, err := NewKeys(cfg.ClusterID)
	if err != nil {
		return nil, err
	}
	root, cancel := context.WithCancelCause(context.Background())
	return &Elector{cfg: cfg, keys: keys, root: root, cancel: cancel}, nil
}

// Close ends every leadership of e (as if lost; their leases are revoked,
// bounded by the request timeout), stops campaigns in progress and waits
// for e's goroutines.
func (e *Elector) Close() {
	e.mu.Lock()
	e.mu.closed = true
	e.mu.Unlock()
	e.cancel(errElectorClosed)
	e.mu.wg.Wait()
}

// spawn runs f in a goroutine owned by e, or returns false once e is
// closed.
func (e *Elector) spawn(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return false
	}
	e.mu.wg.Add(1)
	go func() {
		defer e.mu.wg.Done()
		f()
	}()
	return true
}

// revoke releases lease id (deleting its keys at once rather than at
// expiry), bounded by the request timeout.
func (e *Elector) revoke(id clientv3.LeaseID) {
	if e.cfg.Client.Ctx().Err() != nil {
		return // client closed: calls would only fail, slowly
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RequestTimeout)
	defer cancel()
	if _, err := e.cfg.Client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		e.cfg.Logger.Warn("ha: revoke lease (it expires by itself)", "lease", fmt.Sprintf("%x", id), "err", err)
	}
}

// revokeAsync is revoke in the background, so that a caller whose context
// has ended is not held up.
func (e *Elector) revokeAsync(id clientv3.LeaseID) {
	if !e.spawn(func() { e.revoke(id) }) {
		e.revoke(id)
	}
}

// Campaign blocks until info's JobManager is elected leader, ctx ends, or
// etcd fails (the caller then campaigns again). A campaign whose session
// is lost while waiting starts again with a new session. The returned
// Leadership ends with Resign (also fine after it is lost) or by closing
// e.
func (e *Elector) Campaign(ctx context.Context, info LeaderInfo) (*Leadership, error) {
	if e.root.Err() != nil {
		return nil, fmt.Errorf("ha: campaign as %q: %w", info.ID, errElectorClosed)
	}
	val, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("ha: campaign as %q: %w", info.ID, err)
	}
	backoff := 50 * time.Millisecond
	for {
		l, err := e.campaignOnce(ctx, info, string(val))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errSessionLost) || ctx.Err() != nil {
			return nil, fmt.Errorf("ha: campaign as %q under %s: %w", info.ID, e.keys.Leader(), err)
		}
		e.cfg.Logger.Warn("ha: campaign session lost, starting again", "id", info.ID, "err", err)
		if err := sleepCtx(ctx, backoff); err != nil {
			return nil, fmt.Errorf("ha: campaign as %q under %s: %w", info.ID, e.keys.Leader(), err)
		}
		backoff = min(2*backoff, e.cfg.SessionTTL)
	}
}

func (e *Elector) campaignOnce(ctx context.Context, info LeaderInfo, val string) (*Leadership, error) {
	c := e.cfg.Client
	ttl := ttlSeconds(e.cfg.SessionTTL)

	// Grant under the caller's context, so that a missing etcd fails the
	// campaign; the session itself must outlive that context.
	gctx, gcancel := e.cfg.bound(ctx)
	g, err := c.Grant(gctx, int64(ttl))
	gcancel()
	if err != nil {
		return nil, fmt.Errorf("grant session lease: %w", err)
	}
	sessCtx, sessCancel := context.WithCancel(e.root)
	sess, err := concurrency.NewSession(c, concurrency.WithLease(g.ID), concurrency.WithTTL(ttl), concurrency.WithContext(sessCtx))
	if err != nil {
		sessCancel()
		e.revokeAsync(g.ID)
		return nil, fmt.Errorf("start session: %w", err)
	}
	abandon := func() {
		sess.Orphan()
		sessCancel()
		e.revokeAsync(g.ID)
	}

	// cctx ends with the caller's context, the session, or the elector.
	cctx, ccancel := context.WithCancelCause(ctx)
	defer ccancel(nil)
	stopRoot := context.AfterFunc(e.root, func() { ccancel(errElectorClosed) })
	defer stopRoot()
	stopSess := context.AfterFunc(sess.Ctx(), func() { ccancel(errSessionLost) })
	defer stopSess()
	fail := func(what string, err error) (*Leadership, error) {
		abandon()
		if cause := context.Cause(cctx); cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	key := fmt.Sprintf("%s/%x", e.keys.Leader(), g.ID)
	pctx, pcancel := e.cfg.bound(cctx)
	resp, err := c.Txn(pctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(g.ID))).
		Commit()
	pcancel()
	if err != nil {
		return fail("put candidate key "+key, err)
	}
	if !resp.Succeeded {
		return fail("put candidate key "+key, errors.New("key already exists"))
	}
	rev := resp.Header.Revision
	if err := waitPredecessors(cctx, c, e.keys.Leader()+"/", rev); err != nil {
		return fail("wait for the leader to go", err)
	}

	lctx, lcancel := context.WithCancelCause(e.root)
	l := &Leadership{
		e:          e,
		info:       info,
		fence:      Fence{Key: key, Rev: rev},
		sess:       sess,
		sessCancel: sessCancel,
		ctx:        lctx,
		cancel:     lcancel,
		done:       make(chan struct{}),
		exited:     make(chan struct{}),
	}
	if !e.spawn(l.monitor) {
		lcancel(errElectorClosed)
		return fail("start leadership", errElectorClosed)
	}
	e.cfg.Logger.Info("ha: elected leader", "id", info.ID, "key", key, "rev", rev)
	return l, nil
}

// waitPredecessors returns once no key under prefix has a create revision
// below rev: every older candidate has gone.
func waitPredecessors(ctx context.Context, c *clientv3.Client, prefix string, rev int64) error {
	for {
		opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
		resp, err := c.Get(ctx, prefix, opts...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := waitDelete(ctx, c, string(resp.Kvs[0].Key), resp.Header.Revision+1); err != nil {
			return err
		}
	}
}

// waitDelete returns when key is deleted at or after revision from, or
// when its watch breaks (the caller then looks again).
func waitDelete(ctx context.Context, c *clientv3.Client, key string, from int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.Watch(wctx, key, clientv3.WithRev(from)) {
		if err := wr.Err(); err != nil {
			return nil
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	return ctx.Err()
}

// Leadership is a won election. Its Fence conditions the leader's writes.
type Leadership struct {
	e          *Elector
	info       LeaderInfo
	fence      Fence
	sess       *concurrency.Session
	sessCancel context.CancelFunc

	ctx    context.Context // cancelled with a reason by Resign or Elector.Close
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when leadership is lost
	exited chan struct{} // closed when monitor no longer uses the session
	mu     struct {
		sync.Mutex
		err error
	}
}

// Info is what the leader published.
func (l *Leadership) Info() LeaderInfo { return l.info }

// Fence is the condition of this leadership's writes: its leader key and
// the key's create revision.
func (l *Leadership) Fence() Fence { return l.fence }

// Done is closed when the leadership is lost: resigned, session lease
// expired or revoked, etcd unreachable for the TTL, leader key deleted,
// client or elector closed.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Err is nil while leading; after Done it wraps ErrNotLeader and the
// reason.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.err
}

// Resign gives leadership up: Done closes, the lease is revoked (its key
// deleted, waking the next candidate). It may be called after the
// leadership was lost, and more than once.
func (l *Leadership) Resign(ctx context.Context) error {
	l.cancel(errResigned)
	select {
	case <-l.exited:
	case <-ctx.Done():
		return fmt.Errorf("ha: resign %s: %w", l.fence.Key, ctx.Err())
	}
	if err := l.e.cfg.Client.Ctx().Err(); err != nil {
		return fmt.Errorf("ha: resign %s: etcd client closed (the key goes when the lease expires): %w", l.fence.Key, err)
	}
	rctx, cancel := l.e.cfg.bound(ctx)
	defer cancel()
	if _, err := l.e.cfg.Client.Revoke(rctx, l.sess.Lease()); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("ha: resign %s: revoke lease (the key goes when the lease expires): %w", l.fence.Key, err)
	}
	return nil
}

// monitor watches the leader key and the session until the leadership
// ends, then releases it.
func (l *Leadership) monitor() {
	defer l.cancel(nil)
	reason := l.watch()
	l.mu.Lock()
	l.mu.err = fmt.Errorf("%w: %w", ErrNotLeader, reason)
	l.mu.Unlock()
	close(l.done)
	l.e.cfg.Logger.Info("ha: leadership ended", "id", l.info.ID, "key", l.fence.Key, "reason", reason)
	l.sess.Orphan()
	l.sessCancel()
	close(l.exited)
	if !errors.Is(reason, errResigned) {
		l.e.revoke(l.sess.Lease()) // Resign revokes under its caller's context
	}
}

// watch returns why the leadership ended.
func (l *Leadership) watch() error {
	c := l.e.cfg.Client
	// ctx ends with the leadership's context or the session.
	ctx, cancel := context.WithCancelCause(l.ctx)
	defer cancel(nil)
	defer context.AfterFunc(l.sess.Ctx(), func() { cancel(errSessionLost) })()
	from := l.fence.Rev + 1
	backoff := 50 * time.Millisecond
	for {
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		deleted := false
		for wr := range c.Watch(wctx, l.fence.Key, clientv3.WithRev(from)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				deleted = deleted || ev.Type == mvccpb.DELETE
			}
			if deleted {
				break
			}
			from = wr.Header.Revision + 1
		}
		wcancel()
		if deleted {
			return errKeyDeleted
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		// The watch broke (etcd member lost its leader, compaction,
		// reconnect): look at the key itself, then watch again.
		gctx, gcancel := l.e.cfg.bound(ctx)
		resp, err := c.Get(gctx, l.fence.Key)
		gcancel()
		switch {
		case err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.fence.Rev):
			return errKeyDeleted
		case err == nil:
			from = resp.Header.Revision + 1
			backoff = 50 * time.Millisecond
			continue
		}
		if sleepCtx(ctx, backoff) != nil {
			return context.Cause(ctx)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// CurrentLeader returns the leader of e's cluster, if any.
func (e *Elector) CurrentLeader(ctx context.Context) (LeaderInfo, bool, error) {
	ctx, cancel := e.cfg.bound(ctx)
	defer cancel()
	return CurrentLeader(ctx, e.cfg.Client, e.keys.Leader())
}

// Observe is Observe on e's cluster.
func (e *Elector) Observe(ctx context.Context) <-chan LeaderInfo {
	return Observe(ctx, e.cfg.Client, e.keys.Leader())
}

// CurrentLeader returns the leader under election prefix (Keys.Leader), if
// any: the candidate with the lowest create revision.
func CurrentLeader(ctx context.Context, c *clientv3.Client, prefix string) (LeaderInfo, bool, error) {
	info, _, ok, err := currentLeader(ctx, c, prefix)
	if err != nil {
		return LeaderInfo{}, false, fmt.Errorf("ha: current leader under %s: %w", prefix, err)
	}
	return info, ok, nil
}

// currentLeader also returns the revision of the answer.
func currentLeader(ctx context.Context, c *clientv3.Client, prefix string) (LeaderInfo, int64, bool, error) {
	resp, err := c.Get(ctx, prefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return LeaderInfo{}, 0, false, err
	}
	if len(resp.Kvs) == 0 {
		return LeaderInfo{}, resp.Header.Revision, false, nil
	}
	return decodeLeaderInfo(resp.Kvs[0].Value), resp.Header.Revision, true, nil
}

// decodeLeaderInfo reads a candidate's value; a value not written by Weir
// (etcdctl elect) becomes the ID.
func decodeLeaderInfo(v []byte) LeaderInfo {
	var info LeaderInfo
	if err := json.Unmarshal(v, &info); err != nil || info.ID == "" {
		return LeaderInfo{ID: string(v)}
	}
	return info
}

// Observe sends the leader under election prefix (Keys.Leader) now and
// after every change; the zero LeaderInfo means there is no leader. A slow
// reader misses intermediate leaders, never the latest. Observe retries
// through etcd errors; the channel is closed when ctx ends or the client
// is closed. Cancel ctx to stop its goroutine.
func Observe(ctx context.Context, c *clientv3.Client, prefix string) <-chan LeaderInfo {
	ch := make(chan LeaderInfo)
	go observe(ctx, c, prefix, ch)
	return ch
}

func observe(ctx context.Context, c *clientv3.Client, prefix string, ch chan<- LeaderInfo) {
	defer close(ch)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.Ctx(), cancel)()
	var last *LeaderInfo
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		info, rev, _, err := currentLeader(ctx, c, prefix)
		if err != nil {
			if sleepCtx(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if last == nil || *last != info {
			select {
			case ch <- info:
				last = &info
			case <-ctx.Done():
				return
			}
		}
		// Wait for any change among the candidates, then look again.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		var werr error
		select {
		case wr, ok := <-c.Watch(wctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1)):
			if !ok {
				werr = errors.New("watch closed")
			} else {
				werr = wr.Err()
			}
		case <-ctx.Done():
		}
		wcancel()
		if werr != nil && sleepCtx(ctx, backoff) != nil {
			return
		}
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
