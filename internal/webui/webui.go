// Package webui is the JobManager's web dashboard: static files embedded in
// the binary (no build step, no CDN) that read the REST API. The script is
// a tree of ES modules (static/app.js imports the others), loaded by the
// browser as they are.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

// static holds every file under static/, subdirectories included.
//
//go:embed static
var static embed.FS

// contentTypes fixes the MIME types of the dashboard's files instead of
// leaving them to the mime package, whose answer for .js comes from the
// host's mime.types (or the Windows registry) and may be text/plain: a
// browser refuses to run a module script served so.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
}

// Handler serves the dashboard.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path
		if name == "" || name[len(name)-1] == '/' {
			name += "index.html"
		}
		if ct, ok := contentTypes[path.Ext(name)]; ok {
			w.Header().Set("Content-Type", ct)
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
