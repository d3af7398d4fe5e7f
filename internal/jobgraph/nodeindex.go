package jobgraph

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// nodeIndex remembers where each path of the document is, to put line
// numbers on errors found after the YAML is gone (in Validate).
type nodeIndex struct {
	entries []*nodeEntry
	byPath  map[string]*nodeEntry
	used    map[*nodeEntry]bool
}

type nodeEntry struct {
	path  string
	key   *yaml.Node // nil for list items
	value *yaml.Node
}

func indexNodes(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{byPath: map[string]*nodeEntry{}, used: map[*nodeEntry]bool{}}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				idx.add(&nodeEntry{path: p, key: k, value: v})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, v := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				idx.add(&nodeEntry{path: p, value: v})
				walk(v, p)
			}
		}
	}
	walk(root, "")
	return idx
}

func (idx *nodeIndex) add(e *nodeEntry) {
	idx.entries = append(idx.entries, e)
	if _, dup := idx.byPath[e.path]; !dup {
		idx.byPath[e.path] = e
	}
}

// findKey finds the mapping key on line named key, each at most once so that
// two same-named errors on one (flow style) line get distinct paths.
func (idx *nodeIndex) findKey(line int, key string) *nodeEntry {
	for _, e := range idx.entries {
		if e.key != nil && e.key.Line == line && e.key.Value == key && !idx.used[e] {
			idx.used[e] = true
			return e
		}
	}
	return nil
}

func (idx *nodeIndex) findValue(line int, tag, value string) *nodeEntry {
	for _, e := range idx.entries {
		v := e.value
		if v.Line != line || v.ShortTag() != tag || idx.used[e] {
			continue
		}
		if v.Kind == yaml.ScalarNode && value != "" && !strings.HasPrefix(v.Value, strings.TrimSuffix(value, "...")) {
			continue
		}
		idx.used[e] = true
		return e
	}
	return nil
}

func (idx *nodeIndex) fillLines(ps []Problem) {
	for i := range ps {
		if ps[i].Line == 0 {
			ps[i].Line = idx.line(ps[i].Path)
		}
	}
}

// line finds the line of path, or of its nearest ancestor present in the
// document when path itself was filled in by a default.
func (idx *nodeIndex) line(path string) int {
	for path != "" {
		if e, ok := idx.byPath[path]; ok {
			if e.key != nil {
				return e.key.Line
			}
			return e.value.Line
		}
		cut := max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['))
		if cut < 0 {
			break
		}
		path = path[:cut]
	}
	return 0
}
