package weir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// Codec encodes the values of a stream, a key or a state to bytes: records
// travel between TaskManagers and state is checkpointed as bytes. Append
// must be deterministic for keys (equal keys, equal bytes: the bytes decide
// the key group).
type Codec[T any] interface {
	Append(dst []byte, v T) []byte
	Decode(b []byte) (T, error)
}

// CodecFor returns the codec Weir uses for T when none is given: for
// strings, byte slices, booleans, integers and floats, protobuf messages,
// and structs (and slices) of those. Basic types and protobuf messages
// encode without reflection; structs walk their fields with reflection
// prepared once per type.
func CodecFor[T any]() (Codec[T], error) {
	if c, ok := registered.Load(reflect.TypeFor[T]()); ok {
		return c.(Codec[T]), nil
	}
	var zero T
	switch any(zero).(type) {
	case string:
		return any(stringCodec{}).(Codec[T]), nil
	case []byte:
		return any(bytesCodec{}).(Codec[T]), nil
	case bool:
		return any(boolCodec{}).(Codec[T]), nil
	case int:
		return any(intCodec[int]{}).(Codec[T]), nil
	case int8:
		return any(intCodec[int8]{}).(Codec[T]), nil
	case int16:
		return any(intCodec[int16]{}).(Codec[T]), nil
	case int32:
		return any(intCodec[int32]{}).(Codec[T]), nil
	case int64:
		return any(intCodec[int64]{}).(Codec[T]), nil
	case Time:
		return any(intCodec[Time]{}).(Codec[T]), nil
	case uint:
		return any(uintCodec[uint]{}).(Codec[T]), nil
	case uint8:
		return any(uintCodec[uint8]{}).(Codec[T]), nil
	case uint16:
		return any(uintCodec[uint16]{}).(Codec[T]), nil
	case uint32:
		return any(uintCodec[uint32]{}).(Codec[T]), nil
	case uint64:
		return any(uintCodec[uint64]{}).(Codec[T]), nil
	case float32:
		return any(float32Codec{}).(Codec[T]), nil
	case float64:
		return any(float64Codec{}).(Codec[T]), nil
	}
	t := reflect.TypeFor[T]()
	if t.Implements(reflect.TypeFor[proto.Message]()) && t.Kind() == reflect.Pointer {
		return protoCodec[T]{}, nil
	}
	enc, dec, err := reflectCodec(t, 0)
	if err != nil {
		return nil, fmt.Errorf("weir: no codec for %v: %w (give one with weir.WithCodec, or the state's WithCodec)", t, err)
	}
	return &structCodec[T]{enc: enc, dec: dec}, nil
}

// registered holds the codecs RegisterCodec was given, by type.
var registered sync.Map

// RegisterCodec makes c the codec of T in every job of the program, where
// neither the job (WithCodec) nor a source (CodecProvider) gave one.
//
// Deprecated: a codec registered for the whole process depends on which
// packages the program happens to import; give it to the job with
// WithCodec, to a state with its WithCodec, or bring it with a connector's
// source (CodecProvider).
func RegisterCodec[T any](c Codec[T]) {
	registered.Store(reflect.TypeFor[T](), c)
}

// CodecProvider is a Source that brings the codecs of the types it yields
// (and of those its users derive from them): FromSource adds them to the
// job, where the job was given none for the type.
type CodecProvider interface {
	Codecs() []JobOption
}

// addCodecs adds the codecs opts give to the job's, keeping those it has.
func (j *Job) addCodecs(opts []JobOption) {
	s := &jobSettings{g: &weirv1.JobGraph{Checkpointing: &weirv1.CheckpointConfig{}}, codecs: map[reflect.Type]any{}}
	for _, o := range opts {
		o(s)
	}
	for t, c := range s.codecs {
		if _, ok := j.codecs[t]; !ok {
			j.codecs[t] = c
		}
	}
}

// mustCodec is the job's codec of T (its own, a source's, or CodecFor's)
// for the API's builders, which report a missing codec as the job's
// error.
func mustCodec[T any](j *Job, what string) Codec[T] {
	if c, ok := j.codecs[reflect.TypeFor[T]()]; ok {
		return c.(Codec[T])
	}
	c, err := CodecFor[T]()
	if err != nil {
		j.fail(fmt.Errorf("%s: %w", what, err))
		return nil
	}
	return c
}

var errShort = errors.New("weir: decode: truncated or corrupt value")

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (stringCodec) Decode(b []byte) (string, error)    { return string(b), nil }

type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }
func (bytesCodec) Decode(b []byte) ([]byte, error)    { return bytes.Clone(b), nil }

type boolCodec struct{}

func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (boolCodec) Decode(b []byte) (bool, error) {
	if len(b) != 1 {
		return false, errShort
	}
	return b[0] == 1, nil
}

type signed interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64
}
type unsigned interface {
	~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

type intCodec[T signed] struct{}

func (intCodec[T]) Append(dst []byte, v T) []byte { return binary.AppendVarint(dst, int64(v)) }
func (intCodec[T]) Decode(b []byte) (T, error) {
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, errShort
	}
	return T(v), nil
}

type uintCodec[T unsigned] struct{}

func (uintCodec[T]) Append(dst []byte, v T) []byte { return binary.AppendUvarint(dst, uint64(v)) }
func (uintCodec[T]) Decode(b []byte) (T, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) {
		return 0, errShort
	}
	return T(v), nil
}

type float64Codec struct{}

func (float64Codec) Append(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
}

func (float64Codec) Decode(b []byte) (float64, error) {
	if len(b) != 8 {
		return 0, errShort
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

type float32Codec struct{}

func (float32Codec) Append(dst []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(dst, math.Float32bits(v))
}

func (float32Codec) Decode(b []byte) (float32, error) {
	if len(b) != 4 {
		return 0, errShort
	}
	return math.Float32frombits(binary.BigEndian.Uint32(b)), nil
}

// protoCodec encodes a protobuf message (T is a pointer to a generated
// message type) in its wire format; deterministic, so usable as a key.
type protoCodec[T any] struct{}

func (protoCodec[T]) Append(dst []byte, v T) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, any(v).(proto.Message))
	if err != nil {
		// Only an invalid message fails (a required field unset, proto2);
		// encoding happens where no error can be returned.
		panic(fmt.Errorf("weir: encode %T: %w", v, err))
	}
	return b
}

func (protoCodec[T]) Decode(b []byte) (T, error) {
	var zero T
	m := any(zero).(proto.Message).ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return zero, err
	}
	return m.(T), nil
}

// structCodec encodes structs, slices and arrays of the supported types
// field by field, in their order, strings and slices length first. State
// keeps the layout it was written in (evolve.go), so a restore reads it
// into a type whose fields were added, removed, reordered, renamed (with
// a tag) or widened. The layout of the type is read once, with
// reflection; a record is encoded and decoded through field offsets,
// without it.
type structCodec[T any] struct {
	enc encFn
	dec decFn
}

func (c *structCodec[T]) Append(dst []byte, v T) []byte {
	return c.enc(dst, unsafe.Pointer(&v))
}

func (c *structCodec[T]) Decode(b []byte) (T, error) {
	var v T
	rest, err := c.dec(b, unsafe.Pointer(&v))
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("weir: decode %T: %d trailing bytes", v, len(rest))
	}
	return v, err
}

// encFn and decFn encode and decode the value at p.
type encFn func(dst []byte, p unsafe.Pointer) []byte
type decFn func(b []byte, p unsafe.Pointer) ([]byte, error)

func varintCodec[I signed]() (encFn, decFn) {
	return func(dst []byte, p unsafe.Pointer) []byte { return binary.AppendVarint(dst, int64(*(*I)(p))) },
		func(b []byte, p unsafe.Pointer) ([]byte, error) {
			x, n := binary.Varint(b)
			if n <= 0 {
				return nil, errShort
			}
			*(*I)(p) = I(x)
			return b[n:], nil
		}
}

func uvarintCodec[U unsigned]() (encFn, decFn) {
	return func(dst []byte, p unsafe.Pointer) []byte { return binary.AppendUvarint(dst, uint64(*(*U)(p))) },
		func(b []byte, p unsafe.Pointer) ([]byte, error) {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				return nil, errShort
			}
			*(*U)(p) = U(x)
			return b[n:], nil
		}
}

// sliceHeader is how a slice is laid out in memory.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// reflectCodec prepares the encoder and decoder of type t once.
func reflectCodec(t reflect.Type, depth int) (encFn, decFn, error) {
	if depth > 16 {
		return nil, nil, fmt.Errorf("type nested too deep")
	}
	switch t.Kind() {
	case reflect.String:
		return func(dst []byte, p unsafe.Pointer) []byte {
				s := *(*string)(p)
				return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
			}, func(b []byte, p unsafe.Pointer) ([]byte, error) {
				s, rest, err := cut(b)
				*(*string)(p) = string(s)
				return rest, err
			}, nil
	case reflect.Bool:
		return func(dst []byte, p unsafe.Pointer) []byte {
				if *(*bool)(p) {
					return append(dst, 1)
				}
				return append(dst, 0)
			}, func(b []byte, p unsafe.Pointer) ([]byte, error) {
				if len(b) < 1 {
					return nil, errShort
				}
				*(*bool)(p) = b[0] == 1
				return b[1:], nil
			}, nil
	case reflect.Int:
		e, d := varintCodec[int]()
		return e, d, nil
	case reflect.Int8:
		e, d := varintCodec[int8]()
		return e, d, nil
	case reflect.Int16:
		e, d := varintCodec[int16]()
		return e, d, nil
	case reflect.Int32:
		e, d := varintCodec[int32]()
		return e, d, nil
	case reflect.Int64:
		e, d := varintCodec[int64]()
		return e, d, nil
	case reflect.Uint:
		e, d := uvarintCodec[uint]()
		return e, d, nil
	case reflect.Uint8:
		e, d := uvarintCodec[uint8]()
		return e, d, nil
	case reflect.Uint16:
		e, d := uvarintCodec[uint16]()
		return e, d, nil
	case reflect.Uint32:
		e, d := uvarintCodec[uint32]()
		return e, d, nil
	case reflect.Uint64:
		e, d := uvarintCodec[uint64]()
		return e, d, nil
	case reflect.Float64:
		return func(dst []byte, p unsafe.Pointer) []byte {
				return binary.BigEndian.AppendUint64(dst, math.Float64bits(*(*float64)(p)))
			}, func(b []byte, p unsafe.Pointer) ([]byte, error) {
				if len(b) < 8 {
					return nil, errShort
				}
				*(*float64)(p) = math.Float64frombits(binary.BigEndian.Uint64(b))
				return b[8:], nil
			}, nil
	case reflect.Float32:
		return func(dst []byte, p unsafe.Pointer) []byte {
				return binary.BigEndian.AppendUint32(dst, math.Float32bits(*(*float32)(p)))
			}, func(b []byte, p unsafe.Pointer) ([]byte, error) {
				if len(b) < 4 {
					return nil, errShort
				}
				*(*float32)(p) = math.Float32frombits(binary.BigEndian.Uint32(b))
				return b[4:], nil
			}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && t.Elem() == reflect.TypeFor[uint8]() {
			return func(dst []byte, p unsafe.Pointer) []byte {
					v := *(*[]byte)(p)
					return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
				}, func(b []byte, p unsafe.Pointer) ([]byte, error) {
					s, rest, err := cut(b)
					if err == nil && len(s) > 0 {
						*(*[]byte)(p) = append([]byte(nil), s...)
					}
					return rest, err
				}, nil
		}
		ee, ed, err := reflectCodec(t.Elem(), depth+1)
		if err != nil {
			return nil, nil, err
		}
		size := t.Elem().Size()
		return func(dst []byte, p unsafe.Pointer) []byte {
			h := (*sliceHeader)(p)
			dst = binary.AppendUvarint(dst, uint64(h.len))
			data := h.data
			for i := range h.len {
				dst = ee(dst, unsafe.Add(data, uintptr(i)*size))
			}
			return dst
		}, sliceDecoder(t, ed), nil
	case reflect.Array:
		ee, ed, err := reflectCodec(t.Elem(), depth+1)
		if err != nil {
			return nil, nil, err
		}
		n, size := t.Len(), t.Elem().Size()
		return func(dst []byte, p unsafe.Pointer) []byte {
				for i := range n {
					dst = ee(dst, unsafe.Add(p, uintptr(i)*size))
				}
				return dst
			}, func(b []byte, p unsafe.Pointer) ([]byte, error) {
				var err error
				for i := range n {
					if b, err = ed(b, unsafe.Add(p, uintptr(i)*size)); err != nil {
						return nil, err
					}
				}
				return b, nil
			}, nil
	case reflect.Struct:
		type field struct {
			off uintptr
			enc encFn
			dec decFn
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				return nil, nil, fmt.Errorf("field %s of %v is not exported", f.Name, t)
			}
			e, d, err := reflectCodec(f.Type, depth+1)
			if err != nil {
				return nil, nil, fmt.Errorf("field %s: %w", f.Name, err)
			}
			fields = append(fields, field{f.Offset, e, d})
		}
		return func(dst []byte, p unsafe.Pointer) []byte {
				for _, f := range fields {
					dst = f.enc(dst, unsafe.Add(p, f.off))
				}
				return dst
			}, func(b []byte, p unsafe.Pointer) ([]byte, error) {
				var err error
				for _, f := range fields {
					if b, err = f.dec(b, unsafe.Add(p, f.off)); err != nil {
						return nil, err
					}
				}
				return b, nil
			}, nil
	}
	return nil, nil, fmt.Errorf("%v is not supported (strings, []byte, bools, numbers, and structs, slices and arrays of them)", t)
}

// sliceDecoder decodes a slice of type t, its length first, each element
// with ed.
func sliceDecoder(t reflect.Type, ed decFn) decFn {
	size := t.Elem().Size()
	return func(b []byte, p unsafe.Pointer) ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return nil, errShort
		}
		b = b[k:]
		if n == 0 {
			return b, nil // empty and nil encode alike; both decode as nil
		}
		s := reflect.MakeSlice(t, int(n), int(n))
		reflect.NewAt(t, p).Elem().Set(s)
		data := s.UnsafePointer()
		var err error
		for i := range int(n) {
			if b, err = ed(b, unsafe.Add(data, uintptr(i)*size)); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
}

func cut(b []byte) (s, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errShort
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// typeName names T in plans, signatures and state schemas.
func typeName[T any]() string { return reflect.TypeFor[T]().String() }
