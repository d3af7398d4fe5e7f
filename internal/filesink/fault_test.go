package filesink

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/fault"
	"github.com/weirproject/weir/internal/sdktest"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	"github.com/weirproject/weir/sdk"
)

// enableFault makes point fail with an injected error the next time only.
func enableFault(t *testing.T, point string) {
	t.Helper()
	if err := fault.Enable(point, `1*return("error")`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fault.Disable(point); err != nil {
			t.Error(err)
		}
	})
}

// An injected failure at either commit fault point fails the notification
// the way an I/O error does (the subtask fails and the job fails over); the
// restored attempt re-commits, and every record ends up committed exactly
// once. The notification covers two epochs (checkpoint 1 was aborted), so a
// failure in the middle leaves the first one visible and the second one
// pending.
func TestFileSinkCommitFaults(t *testing.T) {
	if !fault.Compiled {
		t.Skip("needs -tags failpoints")
	}
	tests := []struct {
		point string
		// the directory when the notification failed
		visible map[string][]string
		hidden  []string
		// again: the point fails once more, during the restore's re-commit
		again bool
	}{
		{point: fault.SinkBeforeCommit, hidden: []string{".part-0-1.pending", ".part-0-2.pending", ".part-0-inprogress-0-2"}},
		{point: fault.SinkMidCommit, visible: map[string][]string{"part-0-1": {"k,a"}}, hidden: []string{".part-0-2.pending", ".part-0-inprogress-0-2"}},
		{point: fault.SinkMidCommit, again: true, visible: map[string][]string{"part-0-1": {"k,a"}}, hidden: []string{".part-0-2.pending", ".part-0-inprogress-0-2"}},
	}
	for _, tc := range tests {
		name := tc.point
		if tc.again {
			name += " twice"
		}
		t.Run(name, func(t *testing.T) {
			dir, chk := t.TempDir(), t.TempDir()
			s := newSink(t, dir, 0, 1)
			s.write(t, "a")
			s.ctx.Checkpoint(t, s.sink, chk, 1)
			if err := s.sink.NotifyCheckpointAborted(1); err != nil {
				t.Fatal(err)
			}
			s.write(t, "b")
			prev := []*weirv1.SubtaskState{s.ctx.Checkpoint(t, s.sink, chk, 2)}
			s.write(t, "c") // after checkpoint 2: replayed after the restore

			enableFault(t, tc.point)
			err := s.sink.NotifyCheckpointComplete(2)
			if !errors.Is(err, fault.ErrInjected) || !strings.Contains(err.Error(), "file-sink: commit checkpoint") {
				t.Fatalf("notification with %s failing: %v, want the injected error with context", tc.point, err)
			}
			visible, hidden := listDir(t, dir)
			if len(visible) == 0 {
				visible = nil
			}
			if !reflect.DeepEqual(visible, tc.visible) || !slices.Equal(hidden, tc.hidden) {
				t.Fatalf("after the failure: committed %v hidden %q, want %v %q", visible, hidden, tc.visible, tc.hidden)
			}

			// The subtask failed; the job restores checkpoint 2.
			attempt := 1
			if tc.again {
				enableFault(t, tc.point)
				ctx := sdktest.Restore(t, "sink", sdk.Config{"path": dir}, 0, 1, attempt, 2, prev)
				if err := (&FileSink{}).Open(ctx); !errors.Is(err, fault.ErrInjected) {
					t.Fatalf("restore with %s failing: %v, want the injected error", tc.point, err)
				}
				attempt++
			}
			s = restoreSinks(t, dir, 1, attempt, 2, prev)[0]
			s.write(t, "c")
			s.ctx.Checkpoint(t, s.sink, chk, 3)
			s.complete(t, 3)
			if err := s.sink.Close(); err != nil {
				t.Fatal(err)
			}
			if got := committedValues(t, dir); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Fatalf("committed values %q, want a, b and c once each", got)
			}
			if _, hidden := listDir(t, dir); len(hidden) != 0 {
				t.Fatalf("hidden files left: %q", hidden)
			}
		})
	}
}
