package webui_test

import (
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/webui"
)

func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

var (
	moduleScript = regexp.MustCompile(`<script type="module" src="([^"]+)"></script>`)
	importFrom   = regexp.MustCompile(`(?m)^\s*(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"`)
)

// TestModulesServed follows the dashboard's module graph from index.html:
// every module is embedded, served with a JavaScript MIME type (browsers
// refuse module scripts of any other) and imports only relative paths of
// embedded files; every .js file under static/ is part of the graph.
func TestModulesServed(t *testing.T) {
	srv := httptest.NewServer(webui.Handler())
	defer srv.Close()

	resp, index := get(t, srv, "/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	m := moduleScript.FindStringSubmatch(index)
	if m == nil {
		t.Fatalf("index.html loads no module script:\n%s", index)
	}
	seen := map[string]bool{}
	queue := []string{"/" + m[1]}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		resp, src := get(t, srv, p)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %s", p, resp.Status)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q, want text/javascript", p, ct)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", p)
		}
		for _, im := range importFrom.FindAllStringSubmatch(src, -1) {
			if !strings.HasPrefix(im[1], "./") || !strings.HasSuffix(im[1], ".js") {
				t.Errorf("%s imports %q: want a relative ./name.js (no build step resolves bare names)", p, im[1])
				continue
			}
			queue = append(queue, "/"+strings.TrimPrefix(im[1], "./"))
		}
	}

	var onDisk []string
	if err := fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".js" {
			onDisk = append(onDisk, "/"+p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range onDisk {
		if !seen[p] {
			t.Errorf("static%s is not imported by any module", p)
		}
	}
	if len(seen) < 2 {
		t.Errorf("module graph %v: want app.js and the modules it imports", slices.Sorted(maps.Keys(seen)))
	}

	for path, want := range map[string]string{"/style.css": "text/css; charset=utf-8", "/favicon.svg": "image/svg+xml"} {
		if resp, _ := get(t, srv, path); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != want {
			t.Errorf("GET %s = %s %q, want %q", path, resp.Status, resp.Header.Get("Content-Type"), want)
		}
	}
}

// TestMarkupOnlyThroughHTMLTag keeps the rule that makes the dashboard
// safe against markup in API strings: only html.js writes markup into the
// page (setHTML and replaceHTML take what its html tag built, which escapes
// every interpolated value); the other modules never touch innerHTML and
// its kin.
func TestMarkupOnlyThroughHTMLTag(t *testing.T) {
	sinks := regexp.MustCompile(`\.(innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write|\beval\(|new Function\(`)
	files, err := filepath.Glob("static/*.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if filepath.Base(f) == "html.js" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if sinks.MatchString(line) {
				t.Errorf("%s:%d writes markup or code around html.js: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
