package weir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/weirproject/weir/sdk"
)

// schemaState is the operator state where a vertex records the type of
// each of its states and the layout its values are written in: a restore
// into a program whose state of that name has another type is refused,
// naming the vertex and the state, before a byte of it is misread, unless
// the layouts say how to migrate the values (evolve.go).
const schemaState = "__weir_schema"

type schema struct {
	vertex string
	list   sdk.ListState
	// restored and declared hold, by state name, the type and, after a
	// NUL byte, the layout (absent in checkpoints of earlier releases and
	// for codecs of the program's own).
	restored map[string]string
	declared map[string]string
	// conflicts are states the restored subtasks recorded two ways (a
	// program that migrated a state in some subtasks only): they are
	// refused rather than read in one of the layouts.
	conflicts map[string]string
}

func openSchema(ctx sdk.Context, vertex string) *schema {
	s := &schema{vertex: vertex, list: ctx.UnionListState(schemaState), restored: map[string]string{}, declared: map[string]string{}}
	for _, it := range s.list.Get() {
		name, typ, ok := strings.Cut(string(it), "\x00")
		if !ok {
			continue
		}
		if prev, seen := s.restored[name]; seen && prev != typ {
			if s.conflicts == nil {
				s.conflicts = map[string]string{}
			}
			pt, _, _ := strings.Cut(prev, "\x00")
			t, _, _ := strings.Cut(typ, "\x00")
			s.conflicts[name] = fmt.Sprintf("its subtasks recorded it as %s and as %s, in two layouts", pt, t)
		}
		s.restored[name] = typ
	}
	return s
}

// kindOf is what of a state's type must never change: value, map or list,
// and whether it has a TTL.
func kindOf(typ string) string {
	kind, _, _ := strings.Cut(typ, " ")
	return kind + fmt.Sprint(strings.HasSuffix(typ, " with TTL"))
}

// declare checks that state name has type typ in the restored checkpoint,
// if it is there. When the type's layout changed in a way evolve.go may
// migrate, it returns the restored layout to migrate from.
func (s *schema) declare(name, typ, layout string) (from string, err error) {
	entry := typ
	if layout != "" {
		entry += "\x00" + layout
	}
	if prev, ok := s.declared[name]; ok {
		if prev != entry {
			pt, _, _ := strings.Cut(prev, "\x00")
			return "", fmt.Errorf("weir: vertex %q: state %q is declared as %s and as %s", s.vertex, name, pt, typ)
		}
		return "", nil
	}
	s.declared[name] = entry
	if c, ok := s.conflicts[name]; ok {
		return "", fmt.Errorf("weir: vertex %q: state %q cannot be restored: %s", s.vertex, name, c)
	}
	prev, ok := s.restored[name]
	if !ok || prev == entry {
		return "", nil
	}
	pt, pl, _ := strings.Cut(prev, "\x00")
	if pt == typ && pl == layout {
		return "", nil
	}
	if pl == "" || layout == "" || kindOf(pt) != kindOf(typ) {
		if pt == typ {
			return "", nil // a layout recorded on one side only: the same type
		}
		return "", fmt.Errorf("weir: vertex %q: state %q is %s in the checkpoint or savepoint restored, but %s in this program: keep its type, or give the new one another name", s.vertex, name, pt, typ)
	}
	return pl, nil
}

// save writes the schema into the snapshot: what this program declared,
// and what the restored one had that this one did not touch.
func (s *schema) save() {
	all := map[string]string{}
	for n, t := range s.restored {
		all[n] = t
	}
	for n, t := range s.declared {
		all[n] = t
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	items := make([][]byte, len(names))
	for i, n := range names {
		items[i] = []byte(n + "\x00" + all[n])
	}
	// Union state: every subtask gets every subtask's items back; the
	// first subtask's copy is enough.
	if len(items) > 0 {
		s.list.Update(items)
	}
}

// keyedScope is the keyed state of one subtask of a process function:
// the states its descriptors resolve to, and the first error one hit
// (decoding a value, a type changed), which fails the subtask.
type keyedScope struct {
	ctx    sdk.Context
	schema *schema
	values map[string]sdk.ValueState
	maps   map[string]sdk.MapState
	err    error
	buf    []byte
}

func (k *keyedScope) fail(err error) {
	if k.err == nil {
		k.err = err
	}
}

// migrateFrom builds the function that rewrites a value stored in the
// layout from into this program's; nil when nothing changes.
type migrateFrom func(from string) (func([]byte) ([]byte, error), error)

// describe returns a state's type name and values' layout for its
// declaration: called once per scope, not per access, since both take
// reflection (and the layout a JSON encoding) to build.
type describe func() (typ, layout string)

func (k *keyedScope) value(name string, d describe, o stateOptions, m migrateFrom) sdk.ValueState {
	if st, ok := k.values[name]; ok {
		return st
	}
	typ, layout := d()
	k.declare(name, typ+o.schema(), layout, false, o, m)
	var st sdk.ValueState
	if o.ttl != nil {
		st = k.ctx.ValueStateTTL(name, *o.ttl)
	} else {
		st = k.ctx.ValueState(name)
	}
	k.values[name] = st
	return st
}

func (k *keyedScope) mapState(name string, d describe, o stateOptions, m migrateFrom) sdk.MapState {
	if st, ok := k.maps[name]; ok {
		return st
	}
	typ, layout := d()
	k.declare(name, typ+o.schema(), layout, true, o, m)
	var st sdk.MapState
	if o.ttl != nil {
		st = k.ctx.MapStateTTL(name, *o.ttl)
	} else {
		st = k.ctx.MapState(name)
	}
	k.maps[name] = st
	return st
}

// declare checks the state against the restored schema and, when its
// values' layout changed compatibly, migrates every stored value before
// the first is read.
func (k *keyedScope) declare(name, typ, layout string, isMap bool, o stateOptions, m migrateFrom) {
	from, err := k.schema.declare(name, typ, layout)
	if err != nil || from == "" {
		if err != nil {
			k.fail(err)
		}
		return
	}
	f, err := m(from)
	if err != nil {
		k.fail(fmt.Errorf("weir: vertex %q: state %q cannot be restored: %w", k.schema.vertex, name, err))
		return
	}
	if f == nil {
		return
	}
	mig, ok := k.ctx.(sdk.StateMigrator)
	if !ok {
		k.fail(fmt.Errorf("weir: vertex %q: state %q needs migrating, which this runtime cannot do", k.schema.vertex, name))
		return
	}
	if o.ttl != nil {
		inner := f
		f = func(b []byte) ([]byte, error) {
			if len(b) < 8 {
				return nil, fmt.Errorf("an entry of %d bytes has no expiry header", len(b))
			}
			v, err := inner(b[8:])
			return append(b[:8:8], v...), err
		}
	}
	if err := mig.MigrateState(name, isMap, f); err != nil {
		k.fail(fmt.Errorf("weir: vertex %q: state %q: %w", k.schema.vertex, name, err))
	}
}

// declarer is a state declaration (ValueState, MapState, ListState).
type declarer interface{ declareIn(k *keyedScope) }

func (s *ValueState[V]) declareIn(k *keyedScope)   { s.state(scoped{k}) }
func (s *MapState[UK, V]) declareIn(k *keyedScope) { s.state(scoped{k}) }
func (s *ListState[V]) declareIn(k *keyedScope)    { s.state(scoped{k}) }

type scoped struct{ k *keyedScope }

func (s scoped) scope() *keyedScope { return s.k }

// declareFields declares the states fn holds in its exported or
// unexported fields (a struct, or a pointer to one), one level deep.
func declareFields(k *keyedScope, fn any) {
	v := reflect.ValueOf(fn)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		// Unexported fields too: reading a pointer through reflection
		// and calling a method of ours on it is allowed by unsafe only.
		var ptr any
		switch {
		case f.CanAddr():
			ptr = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
		case f.CanInterface():
			ptr = f.Interface()
		default:
			continue
		}
		if d, ok := ptr.(declarer); ok {
			d.declareIn(k)
		}
	}
}

// StateOption configures a state declaration.
type StateOption func(*stateOptions)

type stateOptions struct {
	ttl *sdk.StateTTL
	err error
}

// schema is what the options add to the state's type in the schema: a
// TTL changes how values are stored, so a state keeps it or goes without
// across restores; its duration may change.
func (o stateOptions) schema() string {
	if o.ttl != nil {
		return " with TTL"
	}
	return ""
}

func newStateOptions(name string, opts []StateOption) stateOptions {
	var o stateOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		o.err = fmt.Errorf("state %q: %w", name, o.err)
	}
	return o
}

// TTLUpdate says which accesses restart a state's TTL.
type TTLUpdate int

const (
	// OnCreateAndWrite restarts the TTL when a value is written (Flink's
	// default).
	OnCreateAndWrite TTLUpdate = iota
	// OnReadAndWrite restarts it when a value is read too.
	OnReadAndWrite
)

// TTL makes a state's values (a map's: each entry) expire d after their
// last write, or last access with OnReadAndWrite, on processing time. An
// expired value is never returned; the runtime removes it from memory,
// local disk and the next checkpoints within at most d/16 (10 ms to 1 s)
// after it expires, on both backends, a bounded batch at a time. The
// expiry travels with each value through checkpoints and savepoints, so d
// may change between runs; adding a TTL to a state that had none, or
// removing it, is refused at restore.
func TTL(d time.Duration, update ...TTLUpdate) StateOption {
	return func(o *stateOptions) {
		if d < time.Millisecond {
			o.err = fmt.Errorf("a TTL of %v; at least 1ms", d)
			return
		}
		o.ttl = &sdk.StateTTL{TTL: d}
		for _, u := range update {
			if u == OnReadAndWrite {
				o.ttl.RefreshOnRead = true
			}
		}
	}
}

// StateContext is what typed state is read and written through: the
// context a process function gets, scoped to the key being processed.
type StateContext interface {
	scope() *keyedScope
}

// ValueState is keyed state holding one V per key (Flink's ValueState).
// Declare it once, as a field of the process function, and read or write
// it with the function's context.
type ValueState[V any] struct {
	name  string
	codec Codec[V]
	opts  stateOptions
	err   error
}

// NewValueState declares a value state named name, whose values CodecFor's
// codec encodes unless WithCodec gives one.
func NewValueState[V any](name string, opts ...StateOption) *ValueState[V] {
	c, err := CodecFor[V]()
	o := newStateOptions(name, opts)
	return &ValueState[V]{name: name, codec: c, opts: o, err: errors.Join(err, o.err)}
}

// WithCodec encodes the state's values with c: the codec travels with the
// declaration, to every process that runs the job.
func (s *ValueState[V]) WithCodec(c Codec[V]) *ValueState[V] {
	s.codec, s.err = c, s.opts.err
	return s
}

func (s *ValueState[V]) state(ctx StateContext) (*keyedScope, sdk.ValueState) {
	k := ctx.scope()
	if s.err != nil {
		k.fail(fmt.Errorf("weir: state %q: %w", s.name, s.err))
	}
	return k, k.value(s.name, s.describe, s.opts, func(from string) (func([]byte) ([]byte, error), error) {
		return migration(s.codec, from)
	})
}

func (s *ValueState[V]) describe() (string, string) {
	return "value " + typeName[V](), layoutOf(s.codec)
}

// Value is the key's value, false when it has none.
func (s *ValueState[V]) Value(ctx StateContext) (V, bool) {
	k, st := s.state(ctx)
	var zero V
	b, ok := st.Value()
	if !ok || k.err != nil {
		return zero, false
	}
	v, err := s.codec.Decode(b)
	if err != nil {
		k.fail(fmt.Errorf("weir: vertex %q: state %q: %w", k.schema.vertex, s.name, err))
		return zero, false
	}
	return v, true
}

// Update sets the key's value.
func (s *ValueState[V]) Update(ctx StateContext, v V) {
	k, st := s.state(ctx)
	if k.err != nil {
		return
	}
	k.buf = s.codec.Append(k.buf[:0], v)
	st.Update(k.buf)
}

// Clear removes the key's value.
func (s *ValueState[V]) Clear(ctx StateContext) {
	_, st := s.state(ctx)
	st.Clear()
}

// MapState is keyed state holding a map from UK to V per key (Flink's
// MapState); its entries are stored one by one.
type MapState[UK comparable, V any] struct {
	name string
	kc   Codec[UK]
	vc   Codec[V]
	opts stateOptions
	err  error
}

// NewMapState declares a map state named name, whose keys and values
// CodecFor's codecs encode unless WithCodecs gives them.
func NewMapState[UK comparable, V any](name string, opts ...StateOption) *MapState[UK, V] {
	kc, err1 := CodecFor[UK]()
	vc, err2 := CodecFor[V]()
	err := err1
	if err == nil {
		err = err2
	}
	o := newStateOptions(name, opts)
	return &MapState[UK, V]{name: name, kc: kc, vc: vc, opts: o, err: errors.Join(err, o.err)}
}

// WithCodecs encodes the state's keys with kc and its values with vc.
func (s *MapState[UK, V]) WithCodecs(kc Codec[UK], vc Codec[V]) *MapState[UK, V] {
	s.kc, s.vc, s.err = kc, vc, s.opts.err
	return s
}

func (s *MapState[UK, V]) state(ctx StateContext) (*keyedScope, sdk.MapState) {
	k := ctx.scope()
	if s.err != nil {
		k.fail(fmt.Errorf("weir: state %q: %w", s.name, s.err))
	}
	return k, k.mapState(s.name, s.describe, s.opts, func(from string) (func([]byte) ([]byte, error), error) {
		fk, fv, _ := strings.Cut(from, "\x01")
		if fk != layoutOf(s.kc) {
			return nil, fmt.Errorf("its keys' layout changed (%s): a map's keys keep theirs", typeName[UK]())
		}
		return migration(s.vc, fv)
	})
}

// describe's layout is the keys' and the values' layouts, "" when either
// codec is the program's own.
func (s *MapState[UK, V]) describe() (string, string) {
	layout := ""
	if kl, vl := layoutOf(s.kc), layoutOf(s.vc); kl != "" && vl != "" {
		layout = kl + "\x01" + vl
	}
	return fmt.Sprintf("map %s %s", typeName[UK](), typeName[V]()), layout
}

// Get is the value of uk, false when absent.
func (s *MapState[UK, V]) Get(ctx StateContext, uk UK) (V, bool) {
	k, st := s.state(ctx)
	var zero V
	if k.err != nil {
		return zero, false
	}
	b, ok := st.Get(s.kc.Append(nil, uk))
	if !ok {
		return zero, false
	}
	v, err := s.vc.Decode(b)
	if err != nil {
		k.fail(fmt.Errorf("weir: vertex %q: state %q: %w", k.schema.vertex, s.name, err))
		return zero, false
	}
	return v, true
}

// Put sets the value of uk.
func (s *MapState[UK, V]) Put(ctx StateContext, uk UK, v V) {
	k, st := s.state(ctx)
	if k.err != nil {
		return
	}
	st.Put(s.kc.Append(nil, uk), s.vc.Append(nil, v))
}

// Remove deletes uk.
func (s *MapState[UK, V]) Remove(ctx StateContext, uk UK) {
	_, st := s.state(ctx)
	st.Remove(s.kc.Append(nil, uk))
}

// All calls f for every entry, in the byte order of the encoded user
// keys, until f returns false.
func (s *MapState[UK, V]) All(ctx StateContext, f func(UK, V) bool) {
	k, st := s.state(ctx)
	for kb, vb := range st.All() {
		if k.err != nil {
			return
		}
		uk, err := s.kc.Decode(kb)
		if err != nil {
			k.fail(fmt.Errorf("weir: vertex %q: state %q: %w", k.schema.vertex, s.name, err))
			return
		}
		v, err := s.vc.Decode(vb)
		if err != nil {
			k.fail(fmt.Errorf("weir: vertex %q: state %q: %w", k.schema.vertex, s.name, err))
			return
		}
		if !f(uk, v) {
			return
		}
	}
}

// Clear removes every entry of the key.
func (s *MapState[UK, V]) Clear(ctx StateContext) {
	_, st := s.state(ctx)
	st.Clear()
}

// ListState is keyed state holding a list of V per key (Flink's keyed
// ListState).
type ListState[V any] struct {
	name  string
	codec Codec[V]
	opts  stateOptions
	err   error
}

// NewListState declares a list state named name, whose elements
// CodecFor's codec encodes unless WithCodec gives one. With a TTL the
// list expires as a whole, its TTL restarted by every Add or Update.
func NewListState[V any](name string, opts ...StateOption) *ListState[V] {
	c, err := CodecFor[V]()
	o := newStateOptions(name, opts)
	return &ListState[V]{name: name, codec: c, opts: o, err: errors.Join(err, o.err)}
}

// WithCodec encodes the state's elements with c.
func (s *ListState[V]) WithCodec(c Codec[V]) *ListState[V] {
	s.codec, s.err = c, s.opts.err
	return s
}

func (s *ListState[V]) describe() (string, string) {
	return "list " + typeName[V](), layoutOf(s.codec)
}

func (s *ListState[V]) state(ctx StateContext) (*keyedScope, sdk.ValueState) {
	k := ctx.scope()
	if s.err != nil {
		k.fail(fmt.Errorf("weir: state %q: %w", s.name, s.err))
	}
	return k, k.value(s.name, s.describe, s.opts, func(from string) (func([]byte) ([]byte, error), error) {
		f, err := migration(s.codec, from)
		if f == nil || err != nil {
			return nil, err
		}
		// Each element in turn, in the list's framing.
		return func(b []byte) ([]byte, error) {
			var out []byte
			for len(b) > 0 {
				n, w := binary.Uvarint(b)
				if w <= 0 || n > uint64(len(b)-w) {
					return nil, errShort
				}
				v, err := f(b[w : w+int(n)])
				if err != nil {
					return nil, err
				}
				out = append(binary.AppendUvarint(out, uint64(len(v))), v...)
				b = b[w+int(n):]
			}
			return out, nil
		}, nil
	})
}

// Get is the key's list.
func (s *ListState[V]) Get(ctx StateContext) []V {
	k, st := s.state(ctx)
	b, ok := st.Value()
	if !ok || k.err != nil {
		return nil
	}
	var out []V
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			k.fail(fmt.Errorf("weir: vertex %q: state %q: %w", k.schema.vertex, s.name, errShort))
			return nil
		}
		v, err := s.codec.Decode(b[w : w+int(n)])
		if err != nil {
			k.fail(fmt.Errorf("weir: vertex %q: state %q: %w", k.schema.vertex, s.name, err))
			return nil
		}
		out = append(out, v)
		b = b[w+int(n):]
	}
	return out
}

// Add appends v to the key's list.
func (s *ListState[V]) Add(ctx StateContext, v V) {
	k, st := s.state(ctx)
	if k.err != nil {
		return
	}
	prev, _ := st.Value()
	item := s.codec.Append(nil, v)
	k.buf = append(k.buf[:0], prev...)
	k.buf = append(binary.AppendUvarint(k.buf, uint64(len(item))), item...)
	st.Update(k.buf)
}

// Update replaces the key's list.
func (s *ListState[V]) Update(ctx StateContext, vs []V) {
	k, st := s.state(ctx)
	if k.err != nil {
		return
	}
	k.buf = k.buf[:0]
	for _, v := range vs {
		item := s.codec.Append(nil, v)
		k.buf = append(binary.AppendUvarint(k.buf, uint64(len(item))), item...)
	}
	st.Update(k.buf)
}

// Clear empties the key's list.
func (s *ListState[V]) Clear(ctx StateContext) {
	_, st := s.state(ctx)
	st.Clear()
}
