package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/weirproject/weir/internal/blob"
)

// ErrOutsideRoots is returned for a location that is not within the
// storage roots it must stay in.
var ErrOutsideRoots = errors.New("storage: location outside the storage roots")

// CheckWithin returns an error unless loc is one of roots or below one.
// Clients name locations the JobManager then reads (a savepoint to
// restore), writes (a savepoint's target directory) or deletes (a
// savepoint to dispose of); keeping them within its own storage means a
// client cannot make it touch anything else.
//
// A location with a ".." element is refused whatever it resolves to: it
// is never needed to name a savepoint, and in an object store it would
// silently name another prefix or bucket. A local location is made
// absolute and its symbolic links are resolved, as are the roots', so a
// link inside a root that points outside does not pass; what does not
// exist yet (a new target directory) is resolved up to its deepest
// existing parent. An s3:// location must be in a root's bucket and below
// its prefix. The check is as good as the file system stays between it
// and the use: a link swapped in afterwards is not seen.
func CheckWithin(loc string, roots ...string) error {
	if loc == "" {
		return errors.New("storage: empty location")
	}
	if hasDotDot(loc) {
		return fmt.Errorf("%w: %s has a \"..\" element", ErrOutsideRoots, loc)
	}
	if blob.IsLocal(loc) {
		path, err := resolve(blob.LocalPath(loc))
		if err != nil {
			return fmt.Errorf("storage: resolve %s: %w", loc, err)
		}
		for _, root := range roots {
			if !blob.IsLocal(root) {
				continue
			}
			r, err := resolve(blob.LocalPath(root))
			if err != nil {
				return fmt.Errorf("storage: resolve storage root %s: %w", root, err)
			}
			if localWithin(r, path) {
				return nil
			}
		}
		if path != filepath.Clean(blob.LocalPath(loc)) {
			return fmt.Errorf("%w: %s resolves to %s, not under %s", ErrOutsideRoots, loc, path, strings.Join(roots, " or "))
		}
		return fmt.Errorf("%w: %s is not under %s", ErrOutsideRoots, loc, strings.Join(roots, " or "))
	}
	clean := blob.Join(loc)
	for _, root := range roots {
		if blob.Scheme(root) != blob.Scheme(loc) {
			continue
		}
		r := blob.Join(root)
		if clean == r || strings.HasPrefix(clean, strings.TrimSuffix(r, "/")+"/") {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not under %s", ErrOutsideRoots, loc, strings.Join(roots, " or "))
}

// IsRoot reports whether loc names one of roots itself, after the
// resolution CheckWithin does.
func IsRoot(loc string, roots ...string) bool {
	if blob.IsLocal(loc) {
		path, err := resolve(blob.LocalPath(loc))
		if err != nil {
			return false
		}
		return slices.ContainsFunc(roots, func(root string) bool {
			if !blob.IsLocal(root) {
				return false
			}
			r, err := resolve(blob.LocalPath(root))
			return err == nil && r == path
		})
	}
	return slices.ContainsFunc(roots, func(root string) bool {
		return blob.Scheme(root) == blob.Scheme(loc) && blob.Join(root) == blob.Join(loc)
	})
}

// hasDotDot reports whether loc has a ".." path element.
func hasDotDot(loc string) bool {
	if s := blob.Scheme(loc); s != "" {
		loc = loc[len(s)+len("://"):]
	} else {
		loc = blob.LocalPath(loc)
	}
	return slices.Contains(strings.FieldsFunc(loc, func(r rune) bool { return r == '/' || r == filepath.Separator }), "..")
}

// resolve makes path absolute and resolves its symbolic links, those of
// its deepest existing ancestor when path itself does not exist.
func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var rest []string
	for dir := abs; ; {
		resolved, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(append([]string{resolved}, rest...)...), nil
		}
		parent := filepath.Dir(dir)
		// Below a file (ENOTDIR) nothing exists either; creating it
		// fails later, inside.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) || parent == dir {
			return "", err
		}
		// A dangling link is not a missing directory: where it points
		// may be created later, outside.
		if _, lerr := os.Lstat(dir); lerr == nil {
			return "", fmt.Errorf("%s is a symbolic link to nothing", dir)
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
		dir = parent
	}
}

// localWithin reports whether path is root or below it; both are
// resolved absolute paths.
func localWithin(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
