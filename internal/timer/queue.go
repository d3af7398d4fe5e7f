package timer

// queue is a binary min-heap of the pending timers of one domain, ordered
// by (timestamp, key, namespace). Each entry knows its position, so Delete
// takes a timer out wherever it is: the heap holds exactly the pending
// timers. (Hand-written rather than container/heap: no interface calls on
// the record path.)
type queue []*entry

// less orders timers by timestamp, then key, then namespace, in byte
// order. Keys are compared before namespaces, not the concatenation.
func less(a, b *entry) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if ak, bk := a.key(), b.key(); ak != bk {
		return ak < bk
	}
	return a.namespace() < b.namespace()
}

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].pos = int32(i)
	q[j].pos = int32(j)
}

func (q queue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !less(q[i], q[parent]) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down sifts q[i] down; it reports whether it moved.
func (q queue) down(i int) bool {
	start, n := i, len(q)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && less(q[r], q[l]) {
			c = r
		}
		if !less(q[c], q[i]) {
			break
		}
		q.swap(i, c)
		i = c
	}
	return i > start
}

// init establishes the heap order over entries appended in any order,
// their positions set, in linear time.
func (q queue) init() {
	for i := len(q)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *queue) push(e *entry) {
	e.pos = int32(len(*q))
	*q = append(*q, e)
	q.up(len(*q) - 1)
}

// pop removes the earliest timer.
func (q *queue) pop() *entry {
	return q.remove(0)
}

// remove takes the entry at position i out of the heap.
func (q *queue) remove(i int) *entry {
	old := *q
	last := len(old) - 1
	e := old[i]
	if i != last {
		old.swap(i, last)
	}
	old[last] = nil // no reference from the spare capacity
	*q = old[:last]
	if i != last && !q.down(i) {
		q.up(i)
	}
	q.shrink()
	return e
}

// shrink gives memory back once a queue that grew large is mostly empty.
func (q *queue) shrink() {
	if c := cap(*q); c > 1024 && len(*q) < c/4 {
		*q = append(make(queue, 0, c/2), *q...)
	}
}
