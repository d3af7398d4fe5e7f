// Package docs holds Weir's documentation; its test checks every code
// block in it and in the README against the code: Go programs are the
// examples' (which the build compiles), job specs parse and validate,
// and the commands name make targets, CLI commands and flags, and daemon
// flags that exist.
package docs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	_ "github.com/weirproject/weir/internal/connector/builtin" // the built-in connectors, for the job graph's validation
	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/sql/compile"
)

// block is one fenced code block.
type block struct {
	file, lang, text string
	line             int
}

func blocks(t *testing.T) []block {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "README.md"))
	var out []block
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			lang, ok := strings.CutPrefix(lines[i], "```")
			if !ok {
				continue
			}
			start := i
			var text []string
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				text = append(text, lines[i])
			}
			out = append(out, block{file: f, lang: lang, text: strings.Join(text, "\n") + "\n", line: start + 1})
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d code blocks: is the test reading the docs?", len(out))
	}
	return out
}

// TestGoBlocks: every Go block is one of the examples, word for word;
// the examples are compiled (and most of them run) by the tests.
func TestGoBlocks(t *testing.T) {
	examples, err := filepath.Glob(filepath.Join("..", "examples", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	progs := map[string]string{}
	for _, e := range examples {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		progs[string(b)] = e
	}
	n := 0
	for _, b := range blocks(t) {
		if b.lang != "go" {
			continue
		}
		n++
		if _, ok := progs[b.text]; !ok {
			t.Errorf("%s:%d: a Go block that is not an example program word for word (examples/*/main.go)", b.file, b.line)
		}
	}
	if n == 0 {
		t.Fatal("no Go block found")
	}
}

// TestYAMLBlocks: every YAML block is a job spec, or part of one, that
// parses and validates. A part is completed as little as it needs: a
// name, checkpoints every second, the vertices its inputs come from
// (sources of the consumer's parallelism), or one vertex if it has none.
func TestYAMLBlocks(t *testing.T) {
	n := 0
	for _, b := range blocks(t) {
		if b.lang != "yaml" {
			continue
		}
		n++
		spec, err := complete(b.text)
		if err != nil {
			t.Errorf("%s:%d: %v", b.file, b.line, err)
			continue
		}
		if _, err := jobgraph.ParseSpec([]byte(spec)); err != nil {
			t.Errorf("%s:%d: the job spec does not parse and validate: %v\n%s", b.file, b.line, err, spec)
		}
	}
	if n == 0 {
		t.Fatal("no YAML block found")
	}
}

// TestSQLBlocks: every SQL block compiles into jobs, as `weir sql` would
// submit them; deploy/kafka-windows.sql, which the docs run on the compose
// cluster, too.
func TestSQLBlocks(t *testing.T) {
	n := 0
	check := func(where, text string) {
		n++
		if _, err := compile.Script(text, compile.Options{CollectAddress: "127.0.0.1:1"}); err != nil {
			t.Errorf("%s: the script does not compile: %v\n%s", where, err, text)
		}
	}
	for _, b := range blocks(t) {
		if b.lang == "sql" {
			check(fmt.Sprintf("%s:%d", b.file, b.line), b.text)
		}
	}
	script, err := os.ReadFile("../deploy/kafka-windows.sql")
	if err != nil {
		t.Fatal(err)
	}
	check("deploy/kafka-windows.sql", string(script))
	if n < 3 {
		t.Fatalf("%d SQL blocks found", n)
	}
}

func complete(text string) (string, error) {
	var head []string
	if strings.HasPrefix(text, "  - ") || strings.HasPrefix(text, "- ") {
		text = "vertices:\n" + text
	}
	var doc struct {
		Name          string `yaml:"name"`
		Checkpointing any    `yaml:"checkpointing"`
		Vertices      []struct {
			Name        string `yaml:"name"`
			Parallelism int    `yaml:"parallelism"`
			Inputs      []struct {
				From string `yaml:"from"`
			} `yaml:"inputs"`
		} `yaml:"vertices"`
	}
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return "", fmt.Errorf("not YAML: %v", err)
	}
	if doc.Name == "" {
		head = append(head, "name: docs")
	}
	if doc.Checkpointing == nil {
		head = append(head, "checkpointing: {interval: 1s}")
	}
	have := map[string]bool{}
	for _, v := range doc.Vertices {
		have[v.Name] = true
	}
	var stubs []string
	for _, v := range doc.Vertices {
		for _, in := range v.Inputs {
			if !have[in.From] {
				have[in.From] = true
				stubs = append(stubs, fmt.Sprintf("  - {name: %s, operator: sequence-source, parallelism: %d}", in.From, max(v.Parallelism, 1)))
			}
		}
	}
	switch {
	case len(doc.Vertices) == 0:
		text = strings.TrimRight(text, "\n") + "\nvertices:\n  - {name: source, operator: sequence-source}\n"
	case len(stubs) > 0:
		text = strings.Replace(text, "vertices:\n", "vertices:\n"+strings.Join(stubs, "\n")+"\n", 1)
	}
	return strings.Join(append(head, text), "\n"), nil
}

// TestCommandBlocks: the commands in shell blocks name make targets that
// exist, CLI commands and flags the CLI has, and daemon flags the daemons
// take. Other commands (go, curl, docker, the example programs) are the
// reader's own.
func TestCommandBlocks(t *testing.T) {
	targets := makeTargets(t)
	n := 0
	for _, b := range blocks(t) {
		if b.lang != "sh" {
			continue
		}
		for i, line := range logicalLines(b.text) {
			words := strings.Fields(strings.SplitN(line, "#", 2)[0])
			if len(words) > 0 && words[0] == "sudo" {
				words = words[1:]
			}
			for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
				words = words[1:] // VAR=value before the command
			}
			if len(words) == 0 {
				continue
			}
			where := fmt.Sprintf("%s:%d (block line %d)", b.file, b.line, i+1)
			switch cmd := filepath.Base(words[0]); {
			case cmd == "make":
				n++
				for _, w := range words[1:] {
					if !strings.Contains(w, "=") && !targets[w] {
						t.Errorf("%s: make has no target %q", where, w)
					}
				}
			case cmd == "weir" && words[0] != "./weir":
				for _, alt := range alternatives(words[1:]) {
					n++
					checkCLI(t, where, alt)
				}
			case cmd == "jobmanager" || cmd == "taskmanager":
				if words[0] == cmd || strings.HasPrefix(words[0], "bin/") {
					n++
					checkDaemon(t, where, cmd, words[1:])
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("checked only %d commands", n)
	}
}

// logicalLines joins lines continued with a backslash.
func logicalLines(text string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " "), "\\"); ok {
			cur += s + " "
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

// alternatives expands a synopsis such as "job list | get ID | cancel ID"
// into one command each, and drops the [ ] of optional parts.
func alternatives(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range words {
		if w == "|" {
			out = append(out, cur)
			cur = nil
			continue
		}
		w = strings.Trim(w, "[]")
		if w != "" && w != "…" {
			cur = append(cur, w)
		}
	}
	out = append(out, cur)
	// The alternatives after the first are verbs of its command group.
	for i := 1; i < len(out); i++ {
		if len(out[0]) > 0 {
			out[i] = append([]string{out[0][0]}, out[i]...)
		}
	}
	return out
}

var build struct {
	once sync.Once
	dir  string
	err  error
}

// binary builds a command of the module once per test run.
func binary(t *testing.T, name string) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "weir-docs-")
		if build.err != nil {
			return
		}
		args := []string{"build", "-o", build.dir + "/"}
		if raceEnabled {
			// As this test is built: weir links PostgreSQL's parser,
			// whose C takes minutes to compile, and the test's own
			// build of it is then reused from the cache.
			args = append(args, "-race")
		}
		args = append(args, "-tags", "failpoints", "../cmd/weir", "../cmd/jobmanager", "../cmd/taskmanager")
		cmd := exec.Command("go", args...)
		// weir links PostgreSQL's parser through cgo.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		cmd.Stderr = os.Stderr
		build.err = cmd.Run()
	})
	if build.err != nil {
		t.Fatalf("building the commands: %v", build.err)
	}
	return filepath.Join(build.dir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

var placeholder = regexp.MustCompile(`^[A-Z][A-Z_]*$|^ID$`)

// checkCLI runs `weir <command path> <flags> --help`: cobra refuses an
// unknown command or flag, and shows the help of a known one without
// running it.
func checkCLI(t *testing.T, where string, words []string) {
	t.Helper()
	var args []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case strings.HasPrefix(w, "--"):
			args = append(args, w)
			// A flag's value (a placeholder or a literal) goes with it.
			if !strings.Contains(w, "=") && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				if w != "--drain" {
					args = append(args, words[i+1])
					i++
				}
			}
		case strings.HasPrefix(w, "-"):
			args = append(args, w)
			if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				args = append(args, words[i+1])
				i++
			}
		case placeholder.MatchString(w) || strings.ContainsAny(w, "/.=,"):
			// An argument: not part of the command path.
		default:
			args = append(args, w)
		}
	}
	out, err := exec.Command(binary(t, "weir"), append(args, "--help")...).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("unknown")) {
		t.Errorf("%s: weir %s: %v\n%s", where, strings.Join(args, " "), err, out)
	}
}

// checkDaemon checks that every --flag given a daemon is one of its flags.
func checkDaemon(t *testing.T, where, daemon string, words []string) {
	t.Helper()
	out, _ := exec.Command(binary(t, daemon), "--help").CombinedOutput()
	for _, w := range words {
		name, ok := strings.CutPrefix(w, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if !bytes.Contains(out, []byte("-"+name+" ")) && !bytes.Contains(out, []byte("-"+name+"\n")) {
			t.Errorf("%s: %s has no flag --%s", where, daemon, name)
		}
	}
}

var target = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)

func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range target.FindAllSubmatch(mk, -1) {
		out[string(m[1])] = true
	}
	if !out["test"] || !out["demo"] {
		t.Fatal("the Makefile has no test or demo target: is the test reading it?")
	}
	return out
}

var metricName = regexp.MustCompile(`\bweir_[a-z0-9_]+`)

// TestPromQLBlocks: every metric a PromQL example queries is one the
// code registers (a histogram's _bucket, _sum and _count series by its
// name).
func TestPromQLBlocks(t *testing.T) {
	var src bytes.Buffer
	for _, dir := range []string{"../internal", "../cmd"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			src.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, b := range blocks(t) {
		if b.lang != "promql" {
			continue
		}
		for _, m := range metricName.FindAllString(b.text, -1) {
			n++
			name := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				name = strings.TrimSuffix(name, suffix)
			}
			if !bytes.Contains(src.Bytes(), []byte(`"`+name+`"`)) {
				t.Errorf("%s:%d: %s is not a metric the code registers", b.file, b.line, m)
			}
		}
	}
	if n == 0 {
		t.Fatal("no metric found in the PromQL examples")
	}
}
