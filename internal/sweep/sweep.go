// Package sweep decides which files of a job's checkpoint directory no
// retained checkpoint references, and may therefore be deleted. It is pure:
// the JobManager lists the directory and deletes what it picks; the
// control-plane simulator hands it its simulated storage.
package sweep

import (
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/checkpoint"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// References are the files the retained checkpoints name: their metadata
// files and every state handle in their metadata, each through norm (which
// makes locations comparable; identity when nil).
func References(metadataPaths []string, retained []*weirv1.CheckpointMetadata, norm func(string) string) map[string]bool {
	if norm == nil {
		norm = func(p string) string { return p }
	}
	refs := map[string]bool{}
	add := func(p string) {
		if p != "" { // inline state lives in the _metadata file
			refs[norm(p)] = true
		}
	}
	for _, p := range metadataPaths {
		add(p)
	}
	for _, md := range retained {
		for _, st := range md.GetSubtasks() {
			add(st.GetKeyedState().GetPath())
			add(st.GetOperatorState().GetPath())
			add(st.GetChannelState().GetPath())
			for _, h := range st.GetSharedFiles() {
				add(h.GetPath())
			}
		}
	}
	return refs
}

// Select returns, sorted, the files (each a path relative to the job's
// checkpoint directory, with '/' separators, paired with its location)
// that refs does not name, within the layout checkpoints write (chk-<n>/,
// shared/, taskowned/): anything else there, such as a savepoint a user
// put in the directory, stays. With maxID > 0 only files known to belong
// to a checkpoint up to maxID are selected: in chk-<n> with n <= maxID, or
// uploaded to shared/ by one (a checkpoint after it may still be
// finishing).
func Select(files []File, refs map[string]bool, maxID int64) []string {
	var out []string
	for _, f := range files {
		first, _, _ := strings.Cut(f.Rel, "/")
		if !isCheckpointLayout(first) || refs[f.Location] {
			continue
		}
		dirID, isChk := checkpointDirID(first)
		if maxID > 0 && isChk && dirID > maxID {
			continue
		}
		if maxID > 0 && !isChk {
			if id, ok := checkpoint.SharedFileCheckpoint(path.Base(f.Rel)); !ok || id > maxID {
				continue
			}
		}
		out = append(out, f.Location)
	}
	slices.Sort(out)
	return out
}

// File is a file of the job's checkpoint directory.
type File struct {
	// Rel is its path relative to the directory, '/'-separated.
	Rel string
	// Location is how references name it.
	Location string
}

// isCheckpointLayout: the entries of a job's directory checkpoints write.
func isCheckpointLayout(name string) bool {
	return strings.HasPrefix(name, "chk-") || name == "shared" || name == "taskowned"
}

func checkpointDirID(name string) (int64, bool) {
	n, ok := strings.CutPrefix(name, "chk-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(n, 10, 64)
	return id, err == nil
}
