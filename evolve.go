package weir

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// Schema evolution of state values. A state's schema entry records, beside
// its type's name, the layout its values were written in: for the codecs
// CodecFor picks, the shape of the type (kinds, and struct fields by name
// in order). A program whose type has another layout restores the state if
// every change is one of these, and refuses it at restore otherwise,
// naming the vertex, the state and the field:
//
//   - a struct field added: it reads as its zero value, or as the default
//     its tag declares (`weir:"default=<value>"`);
//   - a struct field removed: its bytes are skipped;
//   - struct fields reordered: fields are matched by name;
//   - a struct field renamed, its old name in its tag (`weir:"was=Old"`);
//     a field removed and another added without a default in one struct
//     is refused, as it is what an untagged rename looks like;
//   - a number widened: a signed or unsigned integer to a wider one of its
//     kind, an unsigned to a wider signed one, float32 to float64, an
//     integer of at most 32 bits to float64;
//   - a protobuf message changed by protobuf's rules (its wire format
//     takes care of it: its layout is only "proto").
//
// A changed layout is migrated eagerly, when the operator opens (for the
// states a process function holds in its fields) or when the state is
// first used (for others): every stored value of the subtask's key groups is decoded
// in the old layout and encoded in the new one (as Flink's RocksDB backend
// migrates a state when it is registered), so nothing stored afterwards
// mixes the two. Map keys keep their layout: their bytes order the map and
// choose nothing else to migrate by.

// rawSuffix marks the layout of a plain string or []byte value, which
// its codec writes whole.
const rawSuffix = ".raw"

// layout is a type's shape as the state schema records it, in JSON.
type layout struct {
	Kind   string   `json:"k"`
	Elem   *layout  `json:"e,omitempty"`
	Len    int      `json:"n,omitempty"`
	Fields []lfield `json:"f,omitempty"`
}

type lfield struct {
	Name string `json:"n"`
	Of   layout `json:"t"`
}

// layoutOf is the layout of T's values under codec c: "" when c is a codec
// of the program's own, whose layout only its type's name can stand for.
func layoutOf[T any](c Codec[T]) string {
	switch any(c).(type) {
	case stringCodec, bytesCodec, boolCodec, float32Codec, float64Codec, protoCodec[T], *structCodec[T],
		intCodec[int], intCodec[int8], intCodec[int16], intCodec[int32], intCodec[int64], intCodec[Time],
		uintCodec[uint], uintCodec[uint8], uintCodec[uint16], uintCodec[uint32], uintCodec[uint64]:
	default:
		return "" // the program's own codec
	}
	l, err := typeLayout(reflect.TypeFor[T]())
	if err != nil {
		return ""
	}
	switch any(c).(type) {
	case stringCodec, bytesCodec:
		// The whole value, with no length before it, unlike a string
		// or a []byte the struct codec encodes (a named string type).
		l.Kind += rawSuffix
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func typeLayout(t reflect.Type) (layout, error) {
	if t.Implements(reflect.TypeFor[proto.Message]()) && t.Kind() == reflect.Pointer {
		return layout{Kind: "proto"}, nil
	}
	switch t.Kind() {
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && t.Elem() == reflect.TypeFor[uint8]() {
			return layout{Kind: "bytes"}, nil
		}
		e, err := typeLayout(t.Elem())
		return layout{Kind: "slice", Elem: &e}, err
	case reflect.Array:
		e, err := typeLayout(t.Elem())
		return layout{Kind: "array", Elem: &e, Len: t.Len()}, err
	case reflect.Struct:
		l := layout{Kind: "struct"}
		for i := range t.NumField() {
			f := t.Field(i)
			fl, err := typeLayout(f.Type)
			if err != nil {
				return l, err
			}
			l.Fields = append(l.Fields, lfield{Name: f.Name, Of: fl})
		}
		return l, nil
	case reflect.Int:
		return layout{Kind: "int64"}, nil // 64 bits wherever Weir runs
	case reflect.Uint:
		return layout{Kind: "uint64"}, nil
	case reflect.String, reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return layout{Kind: t.Kind().String()}, nil
	}
	return layout{}, fmt.Errorf("%v has no layout", t)
}

func (l layout) String() string {
	switch l.Kind {
	case "slice":
		return "[]" + l.Elem.String()
	case "array":
		return fmt.Sprintf("[%d]%s", l.Len, l.Elem)
	case "struct":
		names := make([]string, len(l.Fields))
		for i, f := range l.Fields {
			names[i] = f.Name + " " + f.Of.String()
		}
		return "struct{" + strings.Join(names, "; ") + "}"
	case "bytes":
		return "[]byte"
	}
	return l.Kind
}

// migration turns values stored in layout from into T's current encoding
// under c; nil when the layouts are equal. An incompatible change is an
// error naming the field.
func migration[T any](c Codec[T], from string) (func([]byte) ([]byte, error), error) {
	to := layoutOf(c)
	if to == "" || from == to {
		return nil, nil
	}
	var old layout
	if err := json.Unmarshal([]byte(from), &old); err != nil {
		return nil, fmt.Errorf("the restored schema's layout is corrupt: %w", err)
	}
	dec, err := migrator(old, reflect.TypeFor[T](), "")
	if err != nil {
		return nil, err
	}
	return func(b []byte) ([]byte, error) {
		var v T
		rest, err := dec(b, unsafe.Pointer(&v))
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d trailing bytes", len(rest))
		}
		if err != nil {
			return nil, fmt.Errorf("migrate a value of %s: %w", old, err)
		}
		return c.Append(nil, v), nil
	}, nil
}

// incompatible is a refused change of the field at path.
func incompatible(path string, old layout, t reflect.Type) error {
	where := "the value"
	if path != "" {
		where = "field " + path
	}
	now, err := typeLayout(t)
	if err != nil {
		return fmt.Errorf("%s: %s in the checkpoint or savepoint restored, %v in this program", where, old, t)
	}
	return fmt.Errorf("%s: %s in the checkpoint or savepoint restored, %s in this program: only added, removed and reordered struct fields and widened numbers migrate", where, old, now)
}

var intBits = map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}

// migrator decodes a value written in layout old into the value of type t
// at a pointer.
func migrator(old layout, t reflect.Type, path string) (decFn, error) {
	now, err := typeLayout(t)
	if err != nil {
		return nil, err
	}
	if equalLayout(old, now) {
		_, dec, err := reflectCodecOrProto(t)
		return dec, err
	}
	switch {
	case old.Kind == "struct" && now.Kind == "struct":
		return structMigrator(old, t, path)
	case old.Kind == "slice" && now.Kind == "slice":
		ed, err := migrator(*old.Elem, t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return sliceDecoder(t, ed), nil
	case old.Kind == "array" && now.Kind == "array" && old.Len == now.Len:
		ed, err := migrator(*old.Elem, t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		size := t.Elem().Size()
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
			var err error
			for i := range old.Len {
				if b, err = ed(b, unsafe.Add(p, uintptr(i)*size)); err != nil {
					return nil, err
				}
			}
			return b, nil
		}, nil
	}
	if kind, ok := strings.CutSuffix(old.Kind, rawSuffix); ok && kind == now.Kind {
		// A whole value of a plain string or []byte, now of a named type.
		_, dec, err := reflectCodec(t, 0)
		if err != nil {
			return nil, err
		}
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
			framed := binary.AppendUvarint(nil, uint64(len(b)))
			if _, err := dec(append(framed, b...), p); err != nil {
				return nil, err
			}
			return nil, nil
		}, nil
	}
	if widen := numberMigrator(old.Kind, t); widen != nil {
		return widen, nil
	}
	return nil, incompatible(path, old, t)
}

func equalLayout(a, b layout) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func reflectCodecOrProto(t reflect.Type) (encFn, decFn, error) {
	if t.Implements(reflect.TypeFor[proto.Message]()) && t.Kind() == reflect.Pointer {
		return nil, nil, fmt.Errorf("a protobuf message inside a struct has no codec")
	}
	return reflectCodec(t, 0)
}

// numberMigrator reads a number stored as kind from into t, when t holds
// every value of from; nil otherwise.
func numberMigrator(from string, t reflect.Type) decFn {
	signed := func(k string) bool { return strings.HasPrefix(k, "int") }
	to, _ := typeLayout(t)
	fb, tb := intBits[from], intBits[to.Kind]
	var read func(b []byte) (float64, int64, uint64, []byte, error)
	switch {
	case fb > 0 && signed(from):
		read = func(b []byte) (float64, int64, uint64, []byte, error) {
			x, n := binary.Varint(b)
			if n <= 0 {
				return 0, 0, 0, nil, errShort
			}
			return float64(x), x, uint64(x), b[n:], nil
		}
	case fb > 0:
		read = func(b []byte) (float64, int64, uint64, []byte, error) {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				return 0, 0, 0, nil, errShort
			}
			return float64(x), int64(x), x, b[n:], nil
		}
	case from == "float32" && to.Kind == "float64":
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
			if len(b) < 4 {
				return nil, errShort
			}
			*(*float64)(p) = float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
			return b[4:], nil
		}
	default:
		return nil
	}
	ok := false
	switch {
	case tb > 0 && signed(to.Kind) == signed(from):
		ok = tb >= fb
	case tb > 0 && signed(to.Kind):
		ok = tb > fb // unsigned into a wider signed
	case to.Kind == "float64":
		ok = fb <= 32
	}
	if !ok {
		return nil
	}
	kind := t.Kind()
	return func(b []byte, p unsafe.Pointer) ([]byte, error) {
		f, i, u, rest, err := read(b)
		if err != nil {
			return nil, err
		}
		v := reflect.NewAt(t, p).Elem()
		switch kind {
		case reflect.Float64:
			v.SetFloat(f)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(i)
		default:
			v.SetUint(u)
		}
		return rest, nil
	}
}

// structMigrator reads the old fields in their order into the new fields
// of the same names, skips those removed and gives those added their
// declared default.
func structMigrator(old layout, t reflect.Type, path string) (decFn, error) {
	type step struct {
		off uintptr
		dec decFn
	}
	var steps []step
	seen := map[string]bool{}
	// A field renamed names its old name: `weir:"was=Old"`.
	was := map[string]reflect.StructField{}
	for i := range t.NumField() {
		if old, ok := tagValue(t.Field(i), "was"); ok {
			was[old] = t.Field(i)
		}
	}
	var removed []string
	for _, of := range old.Fields {
		nf, ok := was[of.Name]
		if !ok {
			nf, ok = t.FieldByName(of.Name)
			ok = ok && len(nf.Index) == 1
			if _, renamed := tagValue(nf, "was"); ok && renamed {
				ok = false // this name is another field's now
			}
		}
		if !ok {
			steps = append(steps, step{dec: skipper(of.Of)})
			removed = append(removed, of.Name)
			continue
		}
		of.Name = nf.Name
		seen[of.Name] = true
		d, err := migrator(of.Of, nf.Type, joinPath(path, of.Name))
		if err != nil {
			return nil, err
		}
		steps = append(steps, step{off: nf.Offset, dec: d})
	}
	var added []string
	for i := range t.NumField() {
		f := t.Field(i)
		if _, ok := tagValue(f, "default"); !seen[f.Name] && !ok {
			added = append(added, f.Name)
		}
	}
	if len(removed) > 0 && len(added) > 0 {
		// A rename would read as a field removed and a field added,
		// losing the value without a word: say which it is.
		return nil, fmt.Errorf("field %s removed and field %s added: if it was renamed, tag the new field `weir:\"was=%s\"`; if it is new, give it a default (`weir:\"default=…\"`)",
			joinPath(path, removed[0]), joinPath(path, added[0]), removed[0])
	}
	type fill struct {
		off uintptr
		set func(p unsafe.Pointer)
	}
	var defaults []fill
	for i := range t.NumField() {
		f := t.Field(i)
		if seen[f.Name] {
			continue
		}
		def, ok := tagValue(f, "default")
		if !ok {
			continue // the zero value
		}
		set, err := defaultSetter(f.Type, def)
		if err != nil {
			return nil, fmt.Errorf("field %s: default %q: %w", joinPath(path, f.Name), def, err)
		}
		defaults = append(defaults, fill{f.Offset, set})
	}
	return func(b []byte, p unsafe.Pointer) ([]byte, error) {
		var err error
		for _, s := range steps {
			if s.dec == nil {
				continue
			}
			if b, err = s.dec(b, unsafe.Add(p, s.off)); err != nil {
				return nil, err
			}
		}
		for _, d := range defaults {
			d.set(unsafe.Add(p, d.off))
		}
		return b, nil
	}, nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// tagValue is a field's `weir:"<key>=…"`.
func tagValue(f reflect.StructField, key string) (string, bool) {
	for _, part := range strings.Split(f.Tag.Get("weir"), ",") {
		if v, ok := strings.CutPrefix(part, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

func defaultSetter(t reflect.Type, s string) (func(unsafe.Pointer), error) {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			return nil, err
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(s, 10, t.Bits())
		if err != nil {
			return nil, err
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, t.Bits())
		if err != nil {
			return nil, err
		}
		v.SetFloat(f)
	default:
		return nil, fmt.Errorf("a default is for a string, bool or number field, not %v", t)
	}
	return func(p unsafe.Pointer) { reflect.NewAt(t, p).Elem().Set(v) }, nil
}

// skipper reads past a value of layout l.
func skipper(l layout) decFn {
	fixed := func(n int) decFn {
		return func(b []byte, _ unsafe.Pointer) ([]byte, error) {
			if len(b) < n {
				return nil, errShort
			}
			return b[n:], nil
		}
	}
	switch l.Kind {
	case "string", "bytes", "proto":
		return func(b []byte, _ unsafe.Pointer) ([]byte, error) {
			_, rest, err := cut(b)
			return rest, err
		}
	case "bool":
		return fixed(1)
	case "float32":
		return fixed(4)
	case "float64":
		return fixed(8)
	case "slice":
		elem := skipper(*l.Elem)
		return func(b []byte, _ unsafe.Pointer) ([]byte, error) {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)) {
				return nil, errShort
			}
			b = b[k:]
			var err error
			for range n {
				if b, err = elem(b, nil); err != nil {
					return nil, err
				}
			}
			return b, nil
		}
	case "array", "struct":
		var parts []decFn
		if l.Kind == "array" {
			for range l.Len {
				parts = append(parts, skipper(*l.Elem))
			}
		}
		for _, f := range l.Fields {
			parts = append(parts, skipper(f.Of))
		}
		return func(b []byte, _ unsafe.Pointer) ([]byte, error) {
			var err error
			for _, s := range parts {
				if b, err = s(b, nil); err != nil {
					return nil, err
				}
			}
			return b, nil
		}
	}
	// Integers: a varint either way.
	return func(b []byte, _ unsafe.Pointer) ([]byte, error) {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errShort
		}
		return b[n:], nil
	}
}
