package checkpoint

import (
	"fmt"
	"strconv"
	"strings"
)

// SharedFileName names an upload to a job's shared directory:
// <store uid>_<checkpoint id>_<local name>. The checkpoint's ID in the
// name lets a sweep tell files of checkpoints that may still be
// finishing from those it may judge (SharedFileCheckpoint).
func SharedFileName(uid string, id int64, local string) string {
	return fmt.Sprintf("%s_%d_%s", uid, id, local)
}

// SharedFileCheckpoint is the checkpoint that uploaded a file of the
// shared directory, by the file's name (a partial upload's too).
func SharedFileCheckpoint(name string) (int64, bool) {
	parts := strings.SplitN(name, "_", 3)
	if len(parts) != 3 {
		return 0, false
	}
	id, err := strconv.ParseInt(parts[1], 10, 64)
	return id, err == nil
}
