//go:build !failpoints

package fault

import "errors"

// Compiled says whether fault points are compiled in (the failpoints tag).
const Compiled = false

// Point is a no-op without the failpoints tag.
func Point(string) error { return nil }

var errNotCompiled = errors.New("fault: fault points are not compiled in (build with -tags failpoints)")

// Enable needs the failpoints tag.
func Enable(name, terms string) error { return errNotCompiled }

// Disable needs the failpoints tag.
func Disable(name string) error { return errNotCompiled }
