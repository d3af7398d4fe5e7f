package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The writing `weir state` commands never change their input: each
// reads a checkpoint or savepoint whole, changes its copy and writes it
// as a new savepoint in --out (canonical keyed state, the same vertices,
// subtasks and key groups), which a job then starts from with --from.

func (a *app) stateSetCommand() *cobra.Command {
	var e editFlags
	cmd := &cobra.Command{
		Use:   "set PATH --out DIR --vertex V --state S --key K [--user-key U] --value X",
		Short: "Write a new savepoint with one keyed entry set",
		Long: `set writes a copy of the checkpoint or savepoint at PATH into DIR, as a
savepoint, with one entry of a keyed state set: a value state's value
(without --user-key) or a map state's user key (with it). Keys and values
are text, or base64 with --base64.`,
		Args: exactArgs("PATH"),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.edit(args[0], e, true)
		},
	}
	e.flags(cmd, true)
	return cmd
}

func (a *app) stateDeleteCommand() *cobra.Command {
	var e editFlags
	cmd := &cobra.Command{
		Use:   "delete PATH --out DIR --vertex V --state S --key K [--user-key U]",
		Short: "Write a new savepoint with one key's entries removed",
		Long: `delete writes a copy of the checkpoint or savepoint at PATH into DIR, as a
savepoint, without one key's entries in one keyed state (with --user-key,
only that user key of a map state). Removing nothing is an error.`,
		Args: exactArgs("PATH"),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.edit(args[0], e, false)
		},
	}
	e.flags(cmd, false)
	return cmd
}

func (a *app) stateBootstrapCommand() *cobra.Command {
	var from, out string
	cmd := &cobra.Command{
		Use:   "bootstrap PATH --from FILE.jsonl --out DIR",
		Short: "Write a new savepoint whose vertices hold the state of a dump",
		Long: `bootstrap writes a copy of the checkpoint or savepoint at PATH into DIR, as a
savepoint, in which every vertex that FILE (JSON lines as dump writes them;
- for stdin) names holds exactly FILE's entries of it: its keyed entries,
placed by key group, and its operator list items. Other vertices keep
theirs. A dump bootstrapped back into its own savepoint gives the same
state.`,
		Args: exactArgs("PATH"),
		RunE: func(_ *cobra.Command, args []string) error {
			if from == "" || out == "" {
				return usageErrorf("bootstrap needs --from and --out")
			}
			cp, err := a.openCheckpoint(args[0])
			if err != nil {
				return err
			}
			sv, err := cp.load()
			if err != nil {
				return err
			}
			r := a.stdin
			if from != "-" {
				f, err := os.Open(from)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			fresh := map[string]bool{}
			sc := bufio.NewScanner(r)
			sc.Buffer(nil, 64<<20)
			for n := 1; sc.Scan(); n++ {
				if len(bytes.TrimSpace(sc.Bytes())) == 0 {
					continue
				}
				var e dumpEntry
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					return fmt.Errorf("%s line %d: not a line of weir state dump: %w", from, n, err)
				}
				v := sv.vertex(e.Vertex)
				if v == nil {
					return fmt.Errorf("%s line %d: vertex %q is not in %s (it has %s)", from, n, e.Vertex, args[0], strings.Join(cp.vertices, ", "))
				}
				if !fresh[e.Vertex] {
					fresh[e.Vertex] = true
					v.keyed, v.lists = nil, map[int32]map[string]*weirv1.OperatorStateSnapshot_ListState{}
				}
				if err := v.add(e); err != nil {
					return fmt.Errorf("%s line %d: %w", from, n, err)
				}
			}
			if err := sc.Err(); err != nil {
				return err
			}
			return a.writeSavepoint(sv, out)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the JSON lines to load (- for stdin)")
	cmd.Flags().StringVar(&out, "out", "", "the directory to write the new savepoint to (new or empty)")
	return cmd
}

type editFlags struct {
	out, vertex, state, key, userKey, value string
	hasUserKey, base64                      bool
}

func (e *editFlags) flags(cmd *cobra.Command, value bool) {
	cmd.Flags().StringVar(&e.out, "out", "", "the directory to write the new savepoint to (new or empty)")
	cmd.Flags().StringVar(&e.vertex, "vertex", "", "the vertex")
	cmd.Flags().StringVar(&e.state, "state", "", "the keyed state")
	cmd.Flags().StringVar(&e.key, "key", "", "the record key")
	cmd.Flags().StringVar(&e.userKey, "user-key", "", "the user key of a map state")
	cmd.Flags().BoolVar(&e.base64, "base64", false, "keys and values are base64")
	if value {
		cmd.Flags().StringVar(&e.value, "value", "", "the value")
	}
	cmd.PreRun = func(cmd *cobra.Command, _ []string) { e.hasUserKey = cmd.Flags().Changed("user-key") }
}

func (a *app) edit(path string, e editFlags, set bool) error {
	if e.out == "" || e.vertex == "" || e.state == "" {
		return usageErrorf("give --out, --vertex and --state")
	}
	dec := func(s string) ([]byte, error) {
		if !e.base64 {
			return []byte(s), nil
		}
		return base64.StdEncoding.DecodeString(s)
	}
	key, err := dec(e.key)
	if err != nil {
		return usageErrorf("--key: %v", err)
	}
	userKey, err := dec(e.userKey)
	if err != nil {
		return usageErrorf("--user-key: %v", err)
	}
	value, err := dec(e.value)
	if err != nil {
		return usageErrorf("--value: %v", err)
	}
	cp, err := a.openCheckpoint(path)
	if err != nil {
		return err
	}
	sv, err := cp.load()
	if err != nil {
		return err
	}
	v := sv.vertex(e.vertex)
	if v == nil {
		return fmt.Errorf("%s has no vertex %q: it has %s", path, e.vertex, strings.Join(cp.vertices, ", "))
	}
	isMap := e.hasUserKey
	match := func(x *weirv1.KeyedStateEntry) bool {
		return x.GetState() == e.state && bytes.Equal(x.GetKey(), key) &&
			(!isMap || x.GetKind() == weirv1.KeyedStateEntry_KIND_MAP && bytes.Equal(x.GetUserKey(), userKey))
	}
	n := len(v.keyed)
	v.keyed = slices.DeleteFunc(v.keyed, match)
	if set {
		kind := weirv1.KeyedStateEntry_KIND_UNSPECIFIED
		if isMap {
			kind = weirv1.KeyedStateEntry_KIND_MAP
		}
		v.keyed = append(v.keyed, &weirv1.KeyedStateEntry{State: e.state, Key: key, UserKey: userKey, Value: value, Kind: kind})
	} else if len(v.keyed) == n {
		return fmt.Errorf("vertex %q has no entry of key %q in state %q: nothing to delete", e.vertex, key, e.state)
	}
	return a.writeSavepoint(sv, e.out)
}

// loaded is a checkpoint's state in memory, to be written anew.
type loaded struct {
	cp       *checkpoint
	vertices []*loadedVertex
}

type loadedVertex struct {
	name     string
	subtasks []*weirv1.SubtaskState
	keyed    []*weirv1.KeyedStateEntry
	// lists are each subtask's operator lists, by name.
	lists map[int32]map[string]*weirv1.OperatorStateSnapshot_ListState
}

func (l *loaded) vertex(name string) *loadedVertex {
	for _, v := range l.vertices {
		if v.name == name {
			return v
		}
	}
	return nil
}

// add puts a dump line's entry into v.
func (v *loadedVertex) add(e dumpEntry) error {
	b64 := func(field, s string) ([]byte, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return b, nil
	}
	var err error
	if e.value, err = b64("value_b64", e.ValueB64); err != nil {
		return err
	}
	if e.Kind == "value" || e.Kind == "map" {
		if e.key, err = b64("key_b64", e.KeyB64); err != nil {
			return err
		}
	}
	if e.Kind == "map" {
		if e.userKey, err = b64("user_key_b64", e.UserKeyB64); err != nil {
			return err
		}
	}
	return v.addRaw(e)
}

// addRaw puts an entry into v, from its bytes (e.key, e.userKey,
// e.value), which it keeps.
func (v *loadedVertex) addRaw(e dumpEntry) error {
	switch e.Kind {
	case "value", "map":
		x := &weirv1.KeyedStateEntry{State: e.State, Key: e.key, Value: e.value}
		if e.Kind == "map" {
			x.Kind, x.UserKey = weirv1.KeyedStateEntry_KIND_MAP, e.userKey
		}
		v.keyed = append(v.keyed, x)
	case "list", "union":
		if e.Subtask < 0 || int(e.Subtask) >= len(v.subtasks) {
			return fmt.Errorf("subtask %d of vertex %q, which has %d", e.Subtask, v.name, len(v.subtasks))
		}
		ls := v.lists[e.Subtask]
		if ls == nil {
			ls = map[string]*weirv1.OperatorStateSnapshot_ListState{}
			v.lists[e.Subtask] = ls
		}
		l := ls[e.State]
		if l == nil {
			l = &weirv1.OperatorStateSnapshot_ListState{Name: e.State, Union: e.Kind == "union"}
			ls[e.State] = l
		}
		l.Items = append(l.Items, e.value)
	default:
		return fmt.Errorf("kind %q: want value, map, list or union", e.Kind)
	}
	return nil
}

// load reads every vertex's state into memory.
func (cp *checkpoint) load() (*loaded, error) {
	l := &loaded{cp: cp}
	for _, name := range cp.vertices {
		v := &loadedVertex{name: name, subtasks: cp.subtasks[name], lists: map[int32]map[string]*weirv1.OperatorStateSnapshot_ListState{}}
		for _, st := range v.subtasks {
			if storage.HasState(st.GetChannelState()) {
				return nil, fmt.Errorf("%s holds records in flight (vertex %s, an unaligned checkpoint): write from a savepoint or an aligned checkpoint", cp.path, name)
			}
		}
		err := cp.entries(name, nil, func(st *weirv1.SubtaskState, e dumpEntry) error {
			// The entry's bytes are the reader's until fn returns.
			e.Subtask = st.GetSubtaskIndex()
			e.key, e.userKey, e.value = bytes.Clone(e.key), bytes.Clone(e.userKey), bytes.Clone(e.value)
			return v.addRaw(e)
		})
		if err != nil {
			return nil, err
		}
		l.vertices = append(l.vertices, v)
	}
	return l, nil
}

// writeSavepoint writes l as a savepoint in dir: new or empty, and not
// where its input is.
func (a *app) writeSavepoint(l *loaded, dir string) error {
	if blob.Scheme(dir) != "" {
		return fmt.Errorf("--out %s: the new savepoint goes to a local directory (copy it to S3 after)", dir)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("--out %s is not empty: the new savepoint goes to a new or empty directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	md := l.cp.md
	maxP := int(md.GetMaxParallelism())
	out := &weirv1.CheckpointMetadata{Version: md.GetVersion(), JobId: md.GetJobId(), CheckpointId: md.GetCheckpointId(),
		TriggerTimestampMs: md.GetTriggerTimestampMs(), CompletionTimestampMs: md.GetCompletionTimestampMs(),
		Type: weirv1.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, MaxParallelism: md.GetMaxParallelism()}
	files := storage.Files{}
	for _, v := range l.vertices {
		groups := make([]map[int32]*weirv1.KeyGroupSnapshot, len(v.subtasks))
		for _, x := range v.keyed {
			kg := int32(keygroup.Of(x.GetKey(), maxP))
			i := slices.IndexFunc(v.subtasks, func(st *weirv1.SubtaskState) bool {
				r := st.GetKeyGroups()
				return r.GetStart() <= kg && kg <= r.GetEnd()
			})
			if i < 0 {
				return fmt.Errorf("vertex %q: key %q is in key group %d, which no subtask owns", v.name, x.GetKey(), kg)
			}
			if groups[i] == nil {
				groups[i] = map[int32]*weirv1.KeyGroupSnapshot{}
			}
			g := groups[i][kg]
			if g == nil {
				g = &weirv1.KeyGroupSnapshot{KeyGroup: kg}
				groups[i][kg] = g
			}
			g.Entries = append(g.Entries, x)
		}
		for i, old := range v.subtasks {
			st := &weirv1.SubtaskState{Vertex: v.name, SubtaskIndex: old.GetSubtaskIndex(), Parallelism: old.GetParallelism(), KeyGroups: old.GetKeyGroups()}
			prefix := filepath.Join(abs, fmt.Sprintf("%s-%d", v.name, old.GetSubtaskIndex()))
			if len(groups[i]) > 0 {
				snap := &weirv1.KeyedStateSnapshot{MaxParallelism: int32(maxP)}
				for _, kg := range slices.Sorted(maps.Keys(groups[i])) {
					snap.KeyGroups = append(snap.KeyGroups, groups[i][kg])
				}
				h, err := files.WriteHandle(prefix+".keyed", snap, storage.DefaultInlineThreshold)
				if err != nil {
					return fmt.Errorf("write %s's keyed state: %w", v.name, err)
				}
				st.KeyedState, st.StateSize = h, st.StateSize+h.GetSize()
			}
			if ls := v.lists[old.GetSubtaskIndex()]; len(ls) > 0 {
				ops := &weirv1.OperatorStateSnapshot{}
				for _, name := range slices.Sorted(maps.Keys(ls)) {
					ops.States = append(ops.States, ls[name])
				}
				h, err := files.WriteHandle(prefix+".operator", ops, storage.DefaultInlineThreshold)
				if err != nil {
					return fmt.Errorf("write %s's operator state: %w", v.name, err)
				}
				st.OperatorState, st.StateSize = h, st.StateSize+h.GetSize()
			}
			st.CheckpointedSize = st.StateSize
			out.Subtasks = append(out.Subtasks, st)
		}
	}
	path, err := storage.WriteMetadata(abs, out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.stdout, path)
	return err
}
