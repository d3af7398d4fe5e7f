package weir

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/nexmark"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

func roundTrip[T any](t *testing.T, vs ...T) {
	t.Helper()
	c, err := CodecFor[T]()
	if err != nil {
		t.Fatalf("CodecFor[%s]: %v", typeName[T](), err)
	}
	for _, v := range vs {
		b := c.Append([]byte("prefix"), v)
		got, err := c.Decode(b[len("prefix"):])
		if err != nil {
			t.Fatalf("%s: decode %v: %v", typeName[T](), v, err)
		}
		equal := reflect.DeepEqual(got, v)
		if m, ok := any(v).(proto.Message); ok {
			equal = proto.Equal(m, any(got).(proto.Message))
		}
		if !equal {
			t.Fatalf("%s: %v came back as %v", typeName[T](), v, got)
		}
		if again := c.Append(nil, v); string(again) != string(b[len("prefix"):]) {
			t.Fatalf("%s: %v encodes two ways", typeName[T](), v)
		}
	}
}

type inner struct {
	Tags []string
	Raw  []byte
}

type outer struct {
	Name  string
	N     int64
	U     uint16
	F     float64
	OK    bool
	In    inner
	List  []inner
	Fixed [2]int32
}

func TestCodecsRoundTrip(t *testing.T) {
	roundTrip(t, "", "word", strings.Repeat("x", 300))
	roundTrip(t, []byte{}, []byte{0, 1, 2})
	roundTrip(t, true, false)
	roundTrip(t, 0, -1, math.MaxInt, math.MinInt)
	roundTrip[int8](t, -128, 127)
	roundTrip[int32](t, math.MinInt32, 7)
	roundTrip[int64](t, math.MinInt64, math.MaxInt64)
	roundTrip[uint](t, 0, math.MaxUint)
	roundTrip[uint64](t, math.MaxUint64)
	roundTrip(t, 0.5, math.Inf(-1), math.MaxFloat64)
	roundTrip[float32](t, 1.25, -3)
	roundTrip(t, outer{}, outer{Name: "a", N: -5, U: 9, F: 2.5, OK: true, In: inner{Tags: []string{"x", ""}, Raw: []byte("r")},
		List: []inner{{Tags: []string{"y"}}}, Fixed: [2]int32{1, -1}})
	// A protobuf message, encoded deterministically.
	roundTrip(t, &weirv1.ExecutionAttemptID{JobId: "j", Vertex: "v", SubtaskIndex: 3})
}

func TestCodecRefusals(t *testing.T) {
	type private struct{ x int }
	type withMap struct{ M map[string]int }
	for name, err := range map[string]error{
		"unexported field": func() error { _, err := CodecFor[private](); return err }(),
		"map":              func() error { _, err := CodecFor[withMap](); return err }(),
		"pointer":          func() error { _, err := CodecFor[*int](); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), "weir.RegisterCodec") && !strings.Contains(err.Error(), "no codec") {
			t.Errorf("%s: CodecFor = %v, want a clear refusal", name, err)
		}
	}
	c, _ := CodecFor[int64]()
	if _, err := c.Decode([]byte{0x80}); err == nil {
		t.Error("a truncated varint decoded")
	}
	s, _ := CodecFor[outer]()
	if _, err := s.Decode([]byte{5, 'a'}); err == nil {
		t.Error("a truncated struct decoded")
	}
}

func BenchmarkCodecStruct(b *testing.B) {
	c, _ := CodecFor[benchRec]()
	v := benchRec{User: "user-42", Amount: 17, Time: 1700000000000}
	var buf []byte
	for b.Loop() {
		buf = c.Append(buf[:0], v)
		if _, err := c.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

type point struct{ X, Y int }

// pointCodec is a hand-written codec: two varints.
type pointCodec struct{}

func (pointCodec) Append(dst []byte, p point) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, int64(p.X)), int64(p.Y))
}

func (pointCodec) Decode(b []byte) (point, error) {
	x, n := binary.Varint(b)
	if n <= 0 {
		return point{}, errShort
	}
	y, m := binary.Varint(b[n:])
	if m <= 0 || n+m != len(b) {
		return point{}, errShort
	}
	return point{int(x), int(y)}, nil
}

func TestRegisterCodec(t *testing.T) {
	RegisterCodec[point](pointCodec{})
	c, err := CodecFor[point]()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(pointCodec); !ok {
		t.Fatalf("CodecFor[point] = %T, want the registered codec", c)
	}
	roundTrip(t, point{1, -2})
}

type benchRec struct {
	User   string
	Amount int64
	Time   int64
}

// benchRecCodec is what a user would write by hand for benchRec.
type benchRecCodec struct{}

func (benchRecCodec) Append(dst []byte, v benchRec) []byte {
	dst = append(binary.AppendUvarint(dst, uint64(len(v.User))), v.User...)
	return binary.AppendVarint(binary.AppendVarint(dst, v.Amount), v.Time)
}

func (benchRecCodec) Decode(b []byte) (benchRec, error) {
	s, rest, err := cut(b)
	if err != nil {
		return benchRec{}, err
	}
	a, n := binary.Varint(rest)
	if n <= 0 {
		return benchRec{}, errShort
	}
	tm, m := binary.Varint(rest[n:])
	if m <= 0 {
		return benchRec{}, errShort
	}
	return benchRec{User: string(s), Amount: a, Time: tm}, nil
}

// BenchmarkCodecHandWritten is BenchmarkCodecStruct's record through a
// hand-written codec: what the reflection of the default one costs.
func BenchmarkCodecHandWritten(b *testing.B) {
	var c Codec[benchRec] = benchRecCodec{}
	v := benchRec{User: "user-42", Amount: 17, Time: 1700000000000}
	var buf []byte
	for b.Loop() {
		buf = c.Append(buf[:0], v)
		if _, err := c.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmitNexmark encodes generated Nexmark events as the typed
// source does, into the emitter's shared chunks: auctions (~600 bytes) do
// not fit a chunk's usual room, which the chunk sizing must absorb
// without copying the chunk.
func BenchmarkEmitNexmark(b *testing.B) {
	e := &emitter[nexmark.Event]{out: &output[nexmark.Event]{codec: nexmarkEventCodec{}}}
	evs := make([]nexmark.Event, 1000)
	for i := range evs {
		evs[i] = nexmark.Generate(nexmark.Config{}, int64(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.record(evs[i%len(evs)], 0)
	}
}

// nexmarkEventCodec is package nexmark's event codec (which imports this
// package, so its tests cannot).
type nexmarkEventCodec struct{}

func (nexmarkEventCodec) Append(dst []byte, e nexmark.Event) []byte {
	return nexmark.AppendEncode(dst, e)
}
func (nexmarkEventCodec) Decode(b []byte) (nexmark.Event, error) { return nexmark.Decode(b) }

// TestConnectorKeyIsTheGraphs: connectors outside this package name their
// built-in connector with the key the job graph's validation reads.
func TestConnectorKeyIsTheGraphs(t *testing.T) {
	if ConnectorKey != jobgraph.ConnectorKey {
		t.Fatalf("ConnectorKey %q, the job graph reads %q", ConnectorKey, jobgraph.ConnectorKey)
	}
}

// Types no other test gives a codec, so the process-wide registry cannot
// answer for them.
type (
	travelIn  struct{ N int }
	travelOut struct{ M map[string]int } // CodecFor has none: maps
)

type travelInCodec struct{}

func (travelInCodec) Append(dst []byte, v travelIn) []byte {
	return binary.AppendVarint(dst, int64(v.N))
}
func (travelInCodec) Decode(b []byte) (travelIn, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return travelIn{}, errShort
	}
	return travelIn{int(n)}, nil
}

type travelOutCodec struct{ tag string }

func (travelOutCodec) Append(dst []byte, v travelOut) []byte { return dst }
func (travelOutCodec) Decode([]byte) (travelOut, error)      { return travelOut{}, nil }

// providingSource yields travelIn and brings codecs for travelIn and
// travelOut.
type providingSource struct{}

func (providingSource) SourceVertex(Records[travelIn]) SourceVertex {
	return SourceVertex{Signature: "providing()"}
}

func (providingSource) Codecs() []JobOption {
	return []JobOption{WithCodec[travelIn](travelInCodec{}), WithCodec[travelOut](travelOutCodec{tag: "source"})}
}

// A codec travels with the job, its source and its state declarations,
// not with the process: a source brings the codecs of its types, a job's
// own codec wins over the source's, and a state declared with a codec
// needs none from CodecFor.
func TestCodecsTravelWithTheJob(t *testing.T) {
	if _, err := CodecFor[travelOut](); err == nil {
		t.Fatal("CodecFor[travelOut] has a codec: the test needs a type it has none for")
	}
	j := NewJob("travel")
	in := FromSource[travelIn](j, "src", providingSource{})
	out := Map(in, "map", func(v travelIn) travelOut { return travelOut{} })
	if _, err := j.Graph(); err != nil {
		t.Fatalf("a job whose source brings its codecs: %v", err)
	}
	if _, ok := in.codec().(travelInCodec); !ok {
		t.Fatalf("the source's stream encodes with %T, want the source's codec", in.codec())
	}
	if c, ok := out.codec().(travelOutCodec); !ok || c.tag != "source" {
		t.Fatalf("the map's stream encodes with %#v, want the source's codec", out.codec())
	}

	j = NewJob("travel", WithCodec[travelOut](travelOutCodec{tag: "job"}))
	out = Map(FromSource[travelIn](j, "src", providingSource{}), "map", func(v travelIn) travelOut { return travelOut{} })
	if c, ok := out.codec().(travelOutCodec); !ok || c.tag != "job" {
		t.Fatalf("the map's stream encodes with %#v, want the job's own codec", out.codec())
	}

	// Without either, the job reports the missing codec.
	j = NewJob("travel")
	Map(FromSource[travelIn](j, "src", sourceOnly{}), "map", func(v travelIn) travelOut { return travelOut{} })
	if _, err := j.Graph(); err == nil || !strings.Contains(err.Error(), "WithCodec") {
		t.Fatalf("a job with no codec for travelOut: %v, want an error naming WithCodec", err)
	}

	if s := NewValueState[travelOut]("v"); s.err == nil {
		t.Fatal("a value state of travelOut with no codec has no error")
	}
	if s := NewValueState[travelOut]("v").WithCodec(travelOutCodec{}); s.err != nil {
		t.Fatalf("a value state given its codec: %v", s.err)
	}
	if s := NewMapState[string, travelOut]("m").WithCodecs(stringCodec{}, travelOutCodec{}); s.err != nil {
		t.Fatalf("a map state given its codecs: %v", s.err)
	}
	if s := NewListState[travelOut]("l").WithCodec(travelOutCodec{}); s.err != nil {
		t.Fatalf("a list state given its codec: %v", s.err)
	}
}

// sourceOnly yields travelIn and brings no codec.
type sourceOnly struct{}

func (sourceOnly) SourceVertex(Records[travelIn]) SourceVertex {
	return SourceVertex{Signature: "plain()"}
}
