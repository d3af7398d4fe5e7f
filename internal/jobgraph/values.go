package jobgraph

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"
)

// present treats an explicit null like an absent key, as YAML users expect
// of "key:" with nothing after it.
func present(n *yaml.Node) bool {
	n = deref(n)
	return n.Kind != 0 && !(n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// scalar returns n if it is a scalar, reporting a problem otherwise.
func (c *converter) scalar(n *yaml.Node, path, want string) (*yaml.Node, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		c.ps.addAt(n.Line, path, "must be %s, got %s", want, describeNode(n))
		return nil, false
	}
	return n, true
}

func (c *converter) str(n *yaml.Node, path string) string {
	if !present(n) {
		return ""
	}
	s, ok := c.scalar(n, path, "a string")
	if !ok {
		return ""
	}
	return s.Value
}

func (c *converter) int32(n *yaml.Node, path string, def int32) int32 {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, "an integer")
	if !ok {
		return def
	}
	var v int64
	if s.ShortTag() != "!!int" || s.Decode(&v) != nil {
		c.ps.addAt(s.Line, path, "must be an integer, got %q", s.Value)
		return def
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		c.ps.addAt(s.Line, path, "%d is out of range", v)
		return def
	}
	return int32(v)
}

func (c *converter) float(n *yaml.Node, path string, def float64) float64 {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, "a number")
	if !ok {
		return def
	}
	var v float64
	if (s.ShortTag() != "!!float" && s.ShortTag() != "!!int") || s.Decode(&v) != nil {
		c.ps.addAt(s.Line, path, "must be a number, got %q", s.Value)
		return def
	}
	return v
}

func (c *converter) bool(n *yaml.Node, path string, def bool) bool {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, "true or false")
	if !ok {
		return def
	}
	var v bool
	if s.ShortTag() != "!!bool" || s.Decode(&v) != nil {
		c.ps.addAt(s.Line, path, "must be true or false, got %q", s.Value)
		return def
	}
	return v
}

func (c *converter) duration(n *yaml.Node, path string, def time.Duration) *durationpb.Duration {
	if !present(n) {
		return durationpb.New(def)
	}
	s, ok := c.scalar(n, path, "a duration")
	if !ok {
		return durationpb.New(def)
	}
	d, err := time.ParseDuration(s.Value)
	if err != nil {
		c.ps.addAt(s.Line, path, "invalid duration %q (want a number with a unit, such as 500ms, 10s or 1m)", s.Value)
		return durationpb.New(def)
	}
	return durationpb.New(d)
}

func enumValue[T ~int32](c *converter, n *yaml.Node, path, what string, names enumNames[T], def T) T {
	if !present(n) {
		return def
	}
	s, ok := c.scalar(n, path, names.want())
	if !ok {
		return def
	}
	v, ok := names.parse(s.Value)
	if !ok {
		c.ps.addAt(s.Line, path, "unknown %s %q (want %s)", what, s.Value, names.want())
		return def
	}
	return v
}

// config converts an operator's free-form settings. google.protobuf.Struct
// holds only JSON values, so integers become float64 and are refused where
// that would change them; other scalars (dates, say) stay the text the user
// wrote, since the operator knows best what they mean.
func (c *converter) config(n *yaml.Node, path string) *structpb.Struct {
	if !present(n) {
		return nil
	}
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		c.ps.addAt(n.Line, path, "must be a mapping, got %s", describeNode(n))
		return nil
	}
	m, ok := c.jsonValue(n, path).(map[string]any)
	if !ok {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		c.ps.addAt(n.Line, path, "%v", err)
		return nil
	}
	return s
}

// maxExactInt is the largest integer a float64 holds exactly (2^53).
const maxExactInt = 1 << 53

func (c *converter) jsonValue(n *yaml.Node, path string) any {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		lines := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i])
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				c.ps.addAt(k.Line, path, "keys must be plain strings, got %s", describeNode(k))
				continue
			}
			kp := path + "." + k.Value
			if first, dup := lines[k.Value]; dup {
				c.ps.addAt(k.Line, kp, "duplicate key, first defined at line %d", first)
				continue
			}
			lines[k.Value] = k.Line
			out[k.Value] = c.jsonValue(n.Content[i+1], kp)
		}
		return out
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, e := range n.Content {
			out[i] = c.jsonValue(e, fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return b
			}
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil || i > maxExactInt || i < -maxExactInt {
				c.ps.addAt(n.Line, path, "%s is too large: numbers are stored as float64, exact only up to 2^53", n.Value)
				return nil
			}
			return float64(i)
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					c.ps.addAt(n.Line, path, "%s is not a finite number", n.Value)
					return nil
				}
				return f
			}
		}
		return n.Value
	}
	c.ps.addAt(n.Line, path, "unsupported value %s", describeNode(n))
	return nil
}
