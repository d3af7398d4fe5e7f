package jobmanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/storage"
	"github.com/weirproject/weir/internal/sweep"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// sweepCheckpoints removes from the job's checkpoint directory every file
// that no retained completed checkpoint references: what subtasks wrote for
// a checkpoint that was aborted, expired or still in flight when the job
// stopped. The coordinator discards an aborted checkpoint's directory and
// the files of late acks, but a subtask may go on writing after the abort,
// or be cancelled before it acknowledges, and nothing tells the
// JobManager about those files.
//
// It runs once every subtask stopped, so no subtask of this job writes any
// more: at a terminal state, after the coordinator closed, everything
// unreferenced goes (maxID 0); before a restart redeploys, the coordinator
// is only stopped and a checkpoint whose metadata was being written may
// still complete, so only files of checkpoints up to the newest retained
// one go (maxID -1), the rest at the next sweep. Only the layout
// checkpoints use is touched (chk-<n>/, shared/, taskowned/); anything else
// in the directory, such as a savepoint a user chose to put there, stays.
// When the retained checkpoints cannot all be read, nothing is removed:
// their references are unknown.
func (j *jobMaster) sweepCheckpoints(why string, maxID int64) {
	all, err := j.store.All(context.Background())
	if err != nil {
		j.log.Warn("checkpoint storage sweep skipped: cannot list retained checkpoints", "why", why, "err", err)
		return
	}
	var retained []*weirv1.CheckpointMetadata
	var paths []string
	for _, c := range all {
		md, err := storage.ReadMetadata(c.MetadataPath)
		if err != nil {
			j.log.Warn("checkpoint storage sweep skipped: unreadable retained checkpoint", "why", why, "checkpoint_id", c.ID, "err", err)
			return
		}
		retained = append(retained, md)
		paths = append(paths, c.MetadataPath)
	}
	if maxID < 0 {
		maxID = 0
		for _, md := range retained {
			maxID = max(maxID, md.GetCheckpointId())
		}
		if maxID == 0 {
			return // nothing completed: any checkpoint may still be finishing
		}
	}
	if !j.s.leading.Load() {
		// Deposed meanwhile: the new leader's checkpoints are not in the
		// list above, and their files must not go.
		j.log.Info("checkpoint storage sweep skipped: no longer the leader", "why", why)
		return
	}
	removed, err := SweepUnreferenced(j.s.storage.JobDir(j.id), paths, retained, maxID)
	if err != nil {
		j.log.Warn("checkpoint storage sweep incomplete", "why", why, "err", err)
	}
	if len(removed) > 0 {
		j.log.Info("removed checkpoint files no retained checkpoint references", "why", why, "files", len(removed), "retained", len(retained))
	}
}

// Unreferenced lists, sorted, the files under jobDir's checkpoint layout
// that none of the retained checkpoints references: neither one of their
// metadata files (metadataPaths) nor a state handle in their metadata.
// With maxID > 0 it lists only files known to belong to a checkpoint up to
// maxID: in chk-<n> with n <= maxID, or uploaded to shared/ by one. In an
// object store it lists the bucket under the job's prefix.
func Unreferenced(jobDir string, metadataPaths []string, retained []*weirv1.CheckpointMetadata, maxID int64) ([]string, error) {
	refs := sweep.References(metadataPaths, retained, normLocation)
	root := normLocation(jobDir)
	st, err := blob.Open(root)
	if err != nil {
		return nil, err
	}
	var files []sweep.File
	for info, err := range st.List(context.Background(), root) {
		if err != nil {
			return nil, fmt.Errorf("jobmanager: list checkpoint dir %s: %w", root, err)
		}
		p := normLocation(info.Location)
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		rel = strings.TrimPrefix(rel, string(filepath.Separator))
		files = append(files, sweep.File{Rel: filepath.ToSlash(rel), Location: p})
	}
	return sweep.Select(files, refs, maxID), nil
}

// normLocation makes locations comparable: absolute clean paths, clean
// URLs.
func normLocation(p string) string {
	if !blob.IsLocal(p) {
		return blob.Join(p)
	}
	if abs, err := filepath.Abs(blob.LocalPath(p)); err == nil {
		return abs
	}
	return filepath.Clean(blob.LocalPath(p))
}

// SweepUnreferenced removes the files Unreferenced lists, then (on a
// file system) the checkpoint directories left empty, and returns the
// files removed.
func SweepUnreferenced(jobDir string, metadataPaths []string, retained []*weirv1.CheckpointMetadata, maxID int64) ([]string, error) {
	files, err := Unreferenced(jobDir, metadataPaths, retained, maxID)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, f := range files {
		if err := storage.Delete(f); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, f)
	}
	if !blob.IsLocal(jobDir) {
		return removed, errors.Join(errs...)
	}
	// Empty chk-<n> directories of aborted checkpoints go too; shared/
	// stays for the checkpoints to come. Deepest first, so a directory
	// emptied by removing its children is removed as well.
	jobDir = blob.LocalPath(jobDir)
	var dirs []string
	entries, _ := os.ReadDir(jobDir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "chk-") {
			_ = filepath.WalkDir(filepath.Join(jobDir, e.Name()), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if left, err := os.ReadDir(d); err != nil || len(left) > 0 {
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
