package kubeha

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weirproject/weir/internal/ha"
)

// Fence is one leadership's term: the writes of a leadership carry it, and
// refuse an object that a later term has written.
type Fence struct {
	// Holder is the leadership's identity in the Lease.
	Holder string
	// Term is spec.leaseTransitions of the Lease as the leadership took it.
	Term int64
}

// IsZero reports whether f is the zero fence, under which every write
// fails with ha.ErrNotLeader (for readers that never write).
func (f Fence) IsZero() bool { return f.Term == 0 }

// termOf is the term annotation of an object, 0 when absent or unreadable.
func termOf(m metav1.Object) int64 {
	t, err := strconv.ParseInt(m.GetAnnotations()[AnnotTerm], 10, 64)
	if err != nil {
		return 0
	}
	return t
}

// object is one fenced ConfigMap. It remembers the version it last read or
// wrote, so that a single writer needs one round trip per update.
type object struct {
	cfg   Config
	names Names
	name  string
	typ   string
	jobID string
	fence Fence
	mu    struct {
		sync.Mutex
		cached *corev1.ConfigMap
	}
}

func newObject(cfg Config, names Names, typ, jobID string, fence Fence) *object {
	name := names.Job(jobID)
	if typ == typeCheckpoints {
		name = names.Checkpoints(jobID)
	}
	return &object{cfg: cfg, names: names, name: name, typ: typ, jobID: jobID, fence: fence}
}

func (o *object) configMaps() interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
} {
	return o.cfg.Client.CoreV1().ConfigMaps(o.cfg.Namespace)
}

func (o *object) remember(cm *corev1.ConfigMap) {
	o.mu.Lock()
	o.mu.cached = cm
	o.mu.Unlock()
}

func (o *object) last() *corev1.ConfigMap {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.cached
}

// read returns the object as the API server holds it now, nil if absent.
func (o *object) read(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := o.configMaps().Get(ctx, o.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get configmap %s/%s: %w", o.cfg.Namespace, o.name, err)
	}
	return cm, nil
}

// update applies mutate to the object, creating it when absent, as a
// compare-and-swap fenced by o's term. mutate may run more than once (on
// conflicts) and returns whether it changed anything; an object whose term
// is older than o's is written even unchanged, which claims it. The result
// is the object as stored (nil when absent and mutate changed nothing).
func (o *object) update(ctx context.Context, mutate func(cm *corev1.ConfigMap) (bool, error)) (*corev1.ConfigMap, error) {
	if o.fence.IsZero() {
		return nil, fmt.Errorf("%w: no leadership fence", ha.ErrNotLeader)
	}
	cm := o.last()
	for {
		if cm == nil {
			var err error
			if cm, err = o.read(ctx); err != nil {
				return nil, err
			}
			if cm == nil {
				created, err := o.create(ctx, mutate)
				if errors.Is(err, errExists) {
					continue
				}
				return created, err
			}
		}
		if t := termOf(cm); t > o.fence.Term {
			return nil, fmt.Errorf("%w: configmap %s was written in term %d, after this leader's term %d", ha.ErrNotLeader, o.name, t, o.fence.Term)
		}
		next := cm.DeepCopy()
		changed, err := mutate(next)
		if err != nil {
			return nil, err
		}
		if !changed && termOf(cm) == o.fence.Term {
			o.remember(cm)
			return cm, nil
		}
		setTerm(next, o.fence.Term)
		updated, err := o.configMaps().Update(ctx, next, metav1.UpdateOptions{})
		switch {
		case err == nil:
			o.remember(updated)
			return updated, nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			cm = nil // changed or deleted since read: read again
			continue
		default:
			o.remember(nil) // the outcome is unknown: read before the next write
			return nil, fmt.Errorf("update configmap %s/%s: %w: %w", o.cfg.Namespace, o.name, errOutcomeUnknown, err)
		}
	}
}

var (
	errExists = errors.New("exists")
	// errOutcomeUnknown marks a failed write that the API server may
	// still have applied (a timeout, a broken connection).
	errOutcomeUnknown = errors.New("outcome unknown")
)

// create makes the object, then checks the fence against the Lease: an
// object created after a later leader took over (and so perhaps after it
// listed the objects it recovers) is deleted again.
func (o *object) create(ctx context.Context, mutate func(cm *corev1.ConfigMap) (bool, error)) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:        o.name,
		Namespace:   o.cfg.Namespace,
		Labels:      o.names.labels(o.typ),
		Annotations: map[string]string{AnnotJobID: o.jobID},
	}}
	changed, err := mutate(cm)
	if err != nil || !changed {
		return nil, err
	}
	setTerm(cm, o.fence.Term)
	created, err := o.configMaps().Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, errExists
	}
	if err != nil {
		return nil, fmt.Errorf("create configmap %s/%s: %w: %w", o.cfg.Namespace, o.name, errOutcomeUnknown, err)
	}
	if ferr := checkFence(ctx, o.cfg, o.names, o.fence); ferr != nil {
		// Only the object as created: one a later leader has written
		// since (its resourceVersion moved) is that leader's now.
		rv := created.ResourceVersion
		if err := o.configMaps().Delete(ctx, o.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			o.cfg.Logger.Warn("kubeha: could not delete a configmap created after leadership was lost", "configmap", o.name, "err", err)
		}
		return nil, fmt.Errorf("create configmap %s: %w", o.name, ferr)
	}
	o.remember(created)
	return created, nil
}

// remove deletes the object, fenced; an absent object is no error.
func (o *object) remove(ctx context.Context) error {
	if o.fence.IsZero() {
		return fmt.Errorf("%w: no leadership fence", ha.ErrNotLeader)
	}
	cm := o.last()
	for {
		if cm == nil {
			var err error
			if cm, err = o.read(ctx); err != nil || cm == nil {
				o.remember(nil)
				return err
			}
		}
		if t := termOf(cm); t > o.fence.Term {
			return fmt.Errorf("%w: configmap %s was written in term %d, after this leader's term %d", ha.ErrNotLeader, o.name, t, o.fence.Term)
		}
		rv := cm.ResourceVersion
		err := o.configMaps().Delete(ctx, o.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			o.remember(nil)
			return nil
		case apierrors.IsConflict(err):
			cm = nil
		default:
			o.remember(nil)
			return fmt.Errorf("delete configmap %s/%s: %w", o.cfg.Namespace, o.name, err)
		}
	}
}

func setTerm(cm *corev1.ConfigMap, term int64) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[AnnotTerm] = strconv.FormatInt(term, 10)
}

// checkFence fails with ha.ErrNotLeader unless f's leadership still holds
// the Lease.
func checkFence(ctx context.Context, cfg Config, names Names, f Fence) error {
	l, err := cfg.Client.CoordinationV1().Leases(cfg.Namespace).Get(ctx, names.Lease(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: lease %s is gone", ha.ErrNotLeader, names.Lease())
	}
	if err != nil {
		return fmt.Errorf("check lease %s: %w", names.Lease(), err)
	}
	if holderOf(l) != f.Holder || transitionsOf(l) != f.Term {
		return fmt.Errorf("%w: lease %s is held by %q in term %d", ha.ErrNotLeader, names.Lease(), holderOf(l), transitionsOf(l))
	}
	return nil
}
