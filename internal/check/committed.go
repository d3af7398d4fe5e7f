package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/weirproject/weir/internal/blob"
)

// ReadCommittedAt is ReadCommitted for a location: a local directory, or
// an object store prefix such as s3://bucket/out read through
// blob.Default (which must have S3 configured). The committed files are
// the objects directly under loc whose names start with neither "." nor
// "_" (file-sink's part-* objects); an in-progress multipart upload is no
// object yet, so it is never read. Objects are read in name order.
func ReadCommittedAt(ctx context.Context, loc string) ([]string, error) {
	if blob.IsLocal(loc) {
		return ReadCommitted(blob.LocalPath(loc))
	}
	st, err := blob.Open(loc)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	dir := strings.TrimSuffix(loc, "/") + "/"
	var objects []string
	for info, err := range st.List(ctx, loc) {
		if err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		name, ok := strings.CutPrefix(info.Location, dir)
		if !ok || name == "" || strings.Contains(name, "/") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		objects = append(objects, info.Location)
	}
	slices.Sort(objects)
	var lines []string
	for _, o := range objects {
		data, err := blob.ReadAll(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		if s := strings.TrimSuffix(string(data), "\n"); s != "" {
			lines = append(lines, strings.Split(s, "\n")...)
		}
	}
	return lines, nil
}
