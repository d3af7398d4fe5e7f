package kubeha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/weirproject/weir/internal/ha"
)

// Reasons a leadership ends; Leadership.Err wraps one of them together
// with ha.ErrNotLeader.
var (
	errResigned      = errors.New("resigned")
	errElectorClosed = errors.New("elector closed")
	errRenewFailed   = errors.New("lease not renewed within two thirds of its duration (API server unreachable or process paused)")
	errTaken         = errors.New("lease taken by another candidate or deleted")
	errTermTaken     = errors.New("term recorded by another leadership")
)

// Elector runs leader elections among the JobManagers of one cluster on
// the cluster's Lease.
type Elector struct {
	cfg   Config
	names Names

	root   context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
}

// NewElector returns an elector for cfg.ClusterID.
func NewElector(cfg Config) (*Elector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	root, cancel := context.WithCancelCause(context.Background())
	return &Elector{cfg: cfg, names: NewNames(cfg.ClusterID), root: root, cancel: cancel}, nil
}

// Close ends every leadership of e (as if lost, without releasing the
// Lease: it expires) and waits for e's goroutines.
func (e *Elector) Close() {
	e.cancel(errElectorClosed)
	e.wg.Wait()
}

func (e *Elector) leases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
} {
	return e.cfg.Client.CoordinationV1().Leases(e.cfg.Namespace)
}

// retryPeriod is how often a candidate looks at the Lease.
func (e *Elector) retryPeriod() time.Duration {
	return max(100*time.Millisecond, e.cfg.LeaseDuration/10)
}

// Campaign blocks until info's JobManager is elected leader or ctx ends.
// Errors of the API server are retried while ctx lasts.
func (e *Elector) Campaign(ctx context.Context, info ha.LeaderInfo) (*Leadership, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.root, func() { cancel(errElectorClosed) })()
	val, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("kubeha: campaign as %q: %w", info.ID, err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	holder := info.ID + "-" + hex.EncodeToString(b)

	// The version of the Lease last seen, and when this candidate first
	// saw it: the Lease expired when that version is older than its
	// duration by this candidate's clock.
	var seenVersion string
	var seenAt time.Time
	for {
		l, err := e.tryAcquire(ctx, holder, string(val), &seenVersion, &seenAt)
		if err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("kubeha: campaign: looking at the lease failed; retrying", "lease", e.names.Lease(), "err", err)
		}
		if l != nil {
			e.cfg.Logger.Info("kubeha: elected leader", "id", info.ID, "lease", e.names.Lease(), "term", l.fence.Term)
			return l, nil
		}
		t := time.NewTimer(e.retryPeriod())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("kubeha: campaign as %q on lease %s: %w", info.ID, e.names.Lease(), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// tryAcquire takes the Lease if it is free or expired; nil when it is
// held.
func (e *Elector) tryAcquire(ctx context.Context, holder, info string, seenVersion *string, seenAt *time.Time) (*Leadership, error) {
	ctx, cancel := e.cfg.bound(ctx)
	defer cancel()
	now := time.Now()
	cur, err := e.leases().Get(ctx, e.names.Lease(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		term, err := e.firstTerm(ctx)
		if err != nil {
			return nil, err
		}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name:      e.names.Lease(),
			Namespace: e.cfg.Namespace,
			Labels:    e.names.labels("leader"),
		}}
		e.take(l, holder, info, term, now)
		created, err := e.leases().Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("create lease: %w", err)
		}
		return e.leadIfRecorded(ctx, created, holder, info, now)
	}
	if err != nil {
		return nil, fmt.Errorf("get lease: %w", err)
	}
	if cur.ResourceVersion != *seenVersion {
		*seenVersion, *seenAt = cur.ResourceVersion, now
	}
	duration := time.Duration(ptrOr(cur.Spec.LeaseDurationSeconds, 0)) * time.Second
	if holderOf(cur) != "" && now.Sub(*seenAt) < duration {
		return nil, nil
	}
	next := cur.DeepCopy()
	e.take(next, holder, info, transitionsOf(cur)+1, now)
	updated, err := e.leases().Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil, nil // someone else moved first: look again
	}
	if err != nil {
		return nil, fmt.Errorf("take lease from %q: %w", holderOf(cur), err)
	}
	return e.leadIfRecorded(ctx, updated, holder, info, now)
}

// leadIfRecorded leads on Lease l once its term is recorded. A Lease
// deleted while its leader leads is created anew in the term after the
// highest the cluster's objects carry, which is the deleted Lease's own
// term if its leader had written nothing yet: two leaders with one term,
// whose fenced writes would not exclude each other. Recording the term
// in the term ConfigMap, which only a higher term may overwrite, lets
// only one of them lead; the other keeps campaigning, and its Lease
// expires into a higher term.
func (e *Elector) leadIfRecorded(ctx context.Context, l *coordinationv1.Lease, holder, info string, now time.Time) (*Leadership, error) {
	f := Fence{Holder: holder, Term: transitionsOf(l)}
	if err := e.recordTerm(ctx, f); err != nil {
		if errors.Is(err, errTermTaken) {
			e.cfg.Logger.Warn("kubeha: took the lease in a term another leadership recorded first; campaigning on", "lease", e.names.Lease(), "term", f.Term, "err", err)
			return nil, nil
		}
		return nil, err
	}
	return e.lead(l, holder, info, now), nil
}

// recordTerm writes f's term into the term ConfigMap unless it holds that
// term or a higher one already.
func (e *Elector) recordTerm(ctx context.Context, f Fence) error {
	cms := e.cfg.Client.CoreV1().ConfigMaps(e.cfg.Namespace)
	name := e.names.Term()
	for {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		absent := apierrors.IsNotFound(err)
		switch {
		case absent:
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.cfg.Namespace, Labels: e.names.labels(typeTerm)}}
		case err != nil:
			return fmt.Errorf("record term %d: get configmap %s: %w", f.Term, name, err)
		case termOf(cm) >= f.Term:
			return fmt.Errorf("%w: configmap %s holds term %d of %q", errTermTaken, name, termOf(cm), cm.Data["holder"])
		}
		setTerm(cm, f.Term)
		cm.Data = map[string]string{"holder": f.Holder}
		if absent {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		switch {
		case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
			continue // another candidate wrote it first: judge again
		case err != nil:
			return fmt.Errorf("record term %d: write configmap %s: %w", f.Term, name, err)
		}
		return nil
	}
}

// firstTerm is the term of a Lease created anew: above every term that
// the cluster's objects carry, so that a deleted Lease does not restart
// the terms below the ones already written.
func (e *Elector) firstTerm(ctx context.Context) (int64, error) {
	list, err := e.cfg.Client.CoreV1().ConfigMaps(e.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelCluster + "=" + e.cfg.ClusterID})
	if err != nil {
		return 0, fmt.Errorf("list configmaps for the highest term: %w", err)
	}
	var highest int64
	for i := range list.Items {
		highest = max(highest, termOf(&list.Items[i]))
	}
	return highest + 1, nil
}

func (e *Elector) take(l *coordinationv1.Lease, holder, info string, term int64, now time.Time) {
	secs := int32(e.cfg.LeaseDuration / time.Second)
	t := int32(term)
	mt := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.AcquireTime = &mt
	l.Spec.RenewTime = &mt
	l.Spec.LeaseTransitions = &t
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotLeader] = info
}

func (e *Elector) lead(l *coordinationv1.Lease, holder, info string, renewed time.Time) *Leadership {
	var li ha.LeaderInfo
	_ = json.Unmarshal([]byte(info), &li)
	lctx, lcancel := context.WithCancelCause(e.root)
	ld := &Leadership{
		e:      e,
		info:   li,
		fence:  Fence{Holder: holder, Term: transitionsOf(l)},
		ctx:    lctx,
		cancel: lcancel,
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	ld.mu.lease, ld.mu.renewed = l, renewed
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ld.monitor()
	}()
	return ld
}

// Leadership is a won election. Its Fence conditions the leader's writes.
type Leadership struct {
	e      *Elector
	info   ha.LeaderInfo
	fence  Fence
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when leadership is lost
	exited chan struct{} // closed when monitor no longer renews
	mu     struct {
		sync.Mutex
		lease *coordinationv1.Lease
		// renewed is when the last successful renewal was sent.
		renewed time.Time
		err     error
	}
}

// Info is what the leader published.
func (l *Leadership) Info() ha.LeaderInfo { return l.info }

// Fence is the condition of this leadership's writes.
func (l *Leadership) Fence() Fence { return l.fence }

// Done is closed when the leadership is lost.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Err is nil while leading; after Done it wraps ha.ErrNotLeader and the
// reason.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.err
}

// Resign gives leadership up: Done closes and the Lease is released (no
// holder), so a standby takes over at once. It may be called after the
// leadership was lost, and more than once.
func (l *Leadership) Resign(ctx context.Context) error {
	l.cancel(errResigned)
	select {
	case <-l.exited:
	case <-ctx.Done():
		return fmt.Errorf("kubeha: resign term %d: %w", l.fence.Term, ctx.Err())
	}
	l.mu.Lock()
	lost := !errors.Is(l.mu.err, errResigned)
	cur := l.mu.lease
	l.mu.Unlock()
	if lost || cur == nil {
		return nil // another candidate holds it, or may by now
	}
	ctx, cancel := l.e.cfg.bound(ctx)
	defer cancel()
	for range 3 {
		if holderOf(cur) != l.fence.Holder || transitionsOf(cur) != l.fence.Term {
			return nil
		}
		next := cur.DeepCopy()
		empty, one := "", int32(1)
		next.Spec.HolderIdentity = &empty
		next.Spec.LeaseDurationSeconds = &one
		delete(next.Annotations, AnnotLeader)
		_, err := l.e.leases().Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("kubeha: resign term %d: release lease (it expires by itself): %w", l.fence.Term, err)
		}
		if cur, err = l.e.leases().Get(ctx, l.e.names.Lease(), metav1.GetOptions{}); err != nil {
			return fmt.Errorf("kubeha: resign term %d: %w", l.fence.Term, err)
		}
	}
	return fmt.Errorf("kubeha: resign term %d: the lease kept changing", l.fence.Term)
}

// monitor renews the Lease until the leadership ends.
func (l *Leadership) monitor() {
	reason := l.renew()
	l.mu.Lock()
	l.mu.err = fmt.Errorf("%w: %w", ha.ErrNotLeader, reason)
	l.mu.Unlock()
	close(l.done)
	close(l.exited)
	l.cancel(nil)
	l.e.cfg.Logger.Info("kubeha: leadership ended", "id", l.info.ID, "term", l.fence.Term, "reason", reason)
}

// renew returns why the leadership ended.
func (l *Leadership) renew() error {
	period := l.e.cfg.LeaseDuration / 3
	deadline := 2 * l.e.cfg.LeaseDuration / 3
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return context.Cause(l.ctx)
		case <-t.C:
		}
		if err := l.renewOnce(deadline); err != nil {
			if errors.Is(err, errTaken) || errors.Is(err, errRenewFailed) {
				return err
			}
			l.e.cfg.Logger.Warn("kubeha: renewing the lease failed; retrying", "term", l.fence.Term, "err", err)
		}
	}
}

func (l *Leadership) renewOnce(deadline time.Duration) error {
	sent := time.Now()
	l.mu.Lock()
	next, renewed := l.mu.lease.DeepCopy(), l.mu.renewed
	l.mu.Unlock()
	if sent.Sub(renewed) > deadline {
		return errRenewFailed
	}
	// The request may take no longer than what is left of the deadline.
	ctx, cancel := context.WithDeadline(l.ctx, renewed.Add(deadline))
	defer cancel()
	mt := metav1.NewMicroTime(sent)
	next.Spec.RenewTime = &mt
	updated, err := l.e.leases().Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		cur, gerr := l.e.leases().Get(ctx, l.e.names.Lease(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return errTaken
		case gerr != nil:
			return gerr
		case holderOf(cur) != l.fence.Holder || transitionsOf(cur) != l.fence.Term:
			return errTaken
		}
		// Someone edited the Lease (a label, an annotation): renew on it.
		l.mu.Lock()
		l.mu.lease = cur
		l.mu.Unlock()
		return errors.New("lease changed under the leader")
	}
	if err != nil {
		if l.ctx.Err() == nil && time.Since(renewed) > deadline {
			return errRenewFailed
		}
		return err
	}
	l.mu.Lock()
	l.mu.lease, l.mu.renewed = updated, sent
	l.mu.Unlock()
	return nil
}

func holderOf(l *coordinationv1.Lease) string { return ptrOr(l.Spec.HolderIdentity, "") }

func transitionsOf(l *coordinationv1.Lease) int64 {
	return int64(ptrOr(l.Spec.LeaseTransitions, 0))
}

func ptrOr[T any](p *T, or T) T {
	if p == nil {
		return or
	}
	return *p
}

// CurrentLeader returns the leader of cfg's cluster, if any.
func CurrentLeader(ctx context.Context, cfg Config) (ha.LeaderInfo, bool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return ha.LeaderInfo{}, false, err
	}
	ctx, cancel := cfg.bound(ctx)
	defer cancel()
	info, _, err := currentLeader(ctx, cfg)
	if err != nil {
		return ha.LeaderInfo{}, false, fmt.Errorf("kubeha: current leader: %w", err)
	}
	return info, info != ha.LeaderInfo{}, nil
}

// currentLeader also returns the Lease's resourceVersion ("" when absent).
func currentLeader(ctx context.Context, cfg Config) (ha.LeaderInfo, string, error) {
	l, err := cfg.Client.CoordinationV1().Leases(cfg.Namespace).Get(ctx, NewNames(cfg.ClusterID).Lease(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ha.LeaderInfo{}, "", nil
	}
	if err != nil {
		return ha.LeaderInfo{}, "", err
	}
	var info ha.LeaderInfo
	if holderOf(l) != "" {
		if err := json.Unmarshal([]byte(l.Annotations[AnnotLeader]), &info); err != nil || info.ID == "" {
			info = ha.LeaderInfo{ID: holderOf(l)}
		}
	}
	return info, l.ResourceVersion, nil
}

// Observe sends the leader of cfg's cluster now and after every change;
// the zero LeaderInfo means there is none. A slow reader misses
// intermediate leaders, never the latest. The channel is closed when ctx
// ends.
func Observe(ctx context.Context, cfg Config) <-chan ha.LeaderInfo {
	ch := make(chan ha.LeaderInfo)
	go func() {
		defer close(ch)
		cfg, err := cfg.withDefaults()
		if err != nil {
			cfg.Logger.Error("kubeha: cannot observe the leader", "err", err)
			<-ctx.Done()
			return
		}
		observe(ctx, cfg, ch)
	}()
	return ch
}

func observe(ctx context.Context, cfg Config, ch chan<- ha.LeaderInfo) {
	var last *ha.LeaderInfo
	backoff := 50 * time.Millisecond
	leases := cfg.Client.CoordinationV1().Leases(cfg.Namespace)
	selector := fields.OneTermEqualSelector("metadata.name", NewNames(cfg.ClusterID).Lease()).String()
	for ctx.Err() == nil {
		gctx, cancel := cfg.bound(ctx)
		info, version, err := currentLeader(gctx, cfg)
		cancel()
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
		// Wait for a change of the Lease, then look again; a watch that
		// cannot start is replaced by a pause.
		w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: version, AllowWatchBookmarks: false})
		if err != nil {
			if sleepCtx(ctx, time.Second) != nil {
				return
			}
			continue
		}
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
		case <-time.After(30 * time.Second): // a watch that went quiet
		}
		w.Stop()
	}
}

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
