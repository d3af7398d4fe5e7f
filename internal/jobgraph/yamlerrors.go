package jobgraph

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxProblem(err error) problems {
	var ps problems
	if m := syntaxLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		ps.addAt(line, "", "invalid YAML: %s", m[2])
		return ps
	}
	ps.add("", "invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	return ps
}

var (
	unknownFieldRe = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)
	duplicateKeyRe = regexp.MustCompile(`^line (\d+): mapping key "(.*)" already defined at line (\d+)$`)
	wrongTypeRe    = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// translateDecodeError rewrites yaml.v3's messages, which name Go types, in
// terms of spec paths.
func translateDecodeError(err error, idx *nodeIndex) problems {
	var ps problems
	te, ok := errors.AsType[*yaml.TypeError](err)
	if !ok {
		return syntaxProblem(err)
	}
	for _, msg := range te.Errors {
		if m := unknownFieldRe.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			key := m[2]
			path := key
			if e := idx.findKey(line, key); e != nil {
				path = e.path
			}
			ps.addAt(line, path, "unknown field%s", suggestField(key, m[3]))
			continue
		}
		if m := duplicateKeyRe.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			path := m[2]
			if e := idx.findKey(line, m[2]); e != nil {
				path = e.path
			}
			ps.addAt(line, path, "duplicate key, first defined at line %s", m[3])
			continue
		}
		if m := wrongTypeRe.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			var path string
			var got string
			if e := idx.findValue(line, m[2], m[3]); e != nil {
				path = e.path
				got = describeNode(e.value)
			} else {
				got = m[2]
			}
			ps.addAt(line, path, "must be %s, got %s", describeGoType(m[4]), got)
			continue
		}
		ps.add("", "%s", msg)
	}
	return ps
}

// docKeys maps the Go type names yaml.v3 puts in its messages to the keys
// allowed there, for "did you mean" hints.
var docKeys = func() map[string][]string {
	m := map[string][]string{}
	for _, v := range []any{specDoc{}, checkpointingDoc{}, restartDoc{}, stateDoc{}, vertexDoc{}, inputDoc{}, watermarksDoc{}} {
		t := reflect.TypeOf(v)
		var keys []string
		for f := range t.Fields() {
			keys = append(keys, strings.Split(f.Tag.Get("yaml"), ",")[0])
		}
		m[t.String()] = keys
	}
	return m
}()

func suggestField(key, goType string) string {
	keys := docKeys[goType]
	if len(keys) == 0 {
		return ""
	}
	best, bestDist := "", 3
	for _, k := range keys {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return fmt.Sprintf(" (known fields: %s)", strings.Join(keys, ", "))
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func describeGoType(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "jobgraph.") || strings.HasPrefix(t, "*jobgraph."):
		return "a mapping"
	}
	return t
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}
