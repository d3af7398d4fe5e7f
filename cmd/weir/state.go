package main

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/blob"
	"github.com/weirproject/weir/internal/blob/s3blob"
	"github.com/weirproject/weir/internal/keygroup"
	"github.com/weirproject/weir/internal/state"
	"github.com/weirproject/weir/internal/storage"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// The `weir state` commands read a checkpoint or a savepoint offline,
// with no JobManager: its _metadata, then each subtask's keyed state (in
// either format docs/savepoint-format.md describes) and operator lists.

func (a *app) stateCommand() *cobra.Command {
	cmd := group("state", "Read a checkpoint's or a savepoint's state offline")
	cmd.AddCommand(a.stateLsCommand(), a.stateDumpCommand(), a.stateGetCommand(), a.stateSetCommand(), a.stateDeleteCommand(), a.stateBootstrapCommand())
	return cmd
}

func (a *app) stateLsCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls PATH",
		Short: "List a checkpoint's vertices and their states, with sizes",
		Long: `ls reads the checkpoint or savepoint at PATH (its directory or its _metadata)
and lists, per vertex, its subtasks and key groups, and per state its kind
(value, map, list or union list), how many keys and entries it holds and
their bytes (keys, user keys and values).`,
		Args: exactArgs("PATH"),
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := parseFormat(output)
			if err != nil {
				return err
			}
			cp, err := a.openCheckpoint(args[0])
			if err != nil {
				return err
			}
			ls, err := cp.list()
			if err != nil {
				return err
			}
			if f == formatJSON {
				return writeJSON(a.stdout, ls)
			}
			return ls.writeTable(a.stdout)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func (a *app) stateDumpCommand() *cobra.Command {
	var o dumpOptions
	cmd := &cobra.Command{
		Use:   "dump PATH [--vertex V] [--state S] [--format jsonl|csv]",
		Short: "Print every entry of a checkpoint's state",
		Long: `dump prints every keyed-state entry and operator list item of the checkpoint
or savepoint at PATH, or of one vertex, or of one of its states, a line
each. JSON lines carry the key, the user key (map state) and the value both
as text, when they are UTF-8, and in base64 (key_b64, user_key_b64,
value_b64), which is exact; CSV has the base64 columns only.`,
		Args: exactArgs("PATH"),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.dump(args[0], o)
		},
	}
	o.flags(cmd)
	return cmd
}

func (a *app) stateGetCommand() *cobra.Command {
	var o dumpOptions
	var key, key64 string
	cmd := &cobra.Command{
		Use:   "get PATH --vertex V --state S (--key K | --key-base64 B)",
		Short: "Print one key's entries of one state",
		Long: `get prints the entries one key holds in one keyed state of one vertex: the
value of a value state, every user key and value of a map state. The key is
the record key the state was written under, as text (--key) or in base64
(--key-base64). A key with no entries is an error.`,
		Args: exactArgs("PATH"),
		RunE: func(_ *cobra.Command, args []string) error {
			if o.vertex == "" || o.state == "" {
				return usageErrorf("get needs --vertex and --state")
			}
			switch {
			case key != "" && key64 != "":
				return usageErrorf("give --key or --key-base64, not both")
			case key64 != "":
				b, err := base64.StdEncoding.DecodeString(key64)
				if err != nil {
					return usageErrorf("--key-base64: %v", err)
				}
				o.key = b
			default:
				o.key = []byte(key) // the empty key, with no flag
			}
			o.keyed = true
			return a.dump(args[0], o)
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&key, "key", "", "the record key, as text")
	cmd.Flags().StringVar(&key64, "key-base64", "", "the record key, in base64")
	return cmd
}

type dumpOptions struct {
	vertex, state, format string
	// keyed: only keyed entries of key.
	keyed bool
	key   []byte
}

func (o *dumpOptions) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.vertex, "vertex", "", "only this vertex's state")
	cmd.Flags().StringVar(&o.state, "state", "", "only this state (a keyed state's or an operator list's name)")
	cmd.Flags().StringVar(&o.format, "format", "jsonl", "jsonl or csv")
}

// checkpoint is a checkpoint or savepoint opened for reading.
type checkpoint struct {
	path string
	md   *weirv1.CheckpointMetadata
	// vertices are the vertex names, sorted; subtasks each one's states,
	// by subtask index.
	vertices []string
	subtasks map[string][]*weirv1.SubtaskState
}

func (a *app) openCheckpoint(path string) (*checkpoint, error) {
	if err := a.configureS3(path); err != nil {
		return nil, err
	}
	md, err := storage.ReadMetadata(path)
	if err != nil {
		if errors.Is(err, storage.ErrCorruptMetadata) {
			return nil, fmt.Errorf("%s is not a readable checkpoint or savepoint: %w", path, err)
		}
		return nil, fmt.Errorf("%s holds no checkpoint or savepoint (a directory with a _metadata file, or the file): %w", path, err)
	}
	cp := &checkpoint{path: path, md: md, subtasks: map[string][]*weirv1.SubtaskState{}}
	for _, st := range md.GetSubtasks() {
		v := st.GetVertex()
		if _, ok := cp.subtasks[v]; !ok {
			cp.vertices = append(cp.vertices, v)
		}
		cp.subtasks[v] = append(cp.subtasks[v], st)
	}
	slices.Sort(cp.vertices)
	for _, sts := range cp.subtasks {
		slices.SortFunc(sts, func(x, y *weirv1.SubtaskState) int { return int(x.GetSubtaskIndex() - y.GetSubtaskIndex()) })
	}
	return cp, nil
}

// configureS3 makes s3:// locations readable, reaching S3 as the AWS
// environment variables say (as the daemons do without --s3-* flags):
// AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN.
func (a *app) configureS3(path string) error {
	if blob.Scheme(path) != "s3" {
		return nil
	}
	env := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := a.lookupEnv(k); ok && v != "" {
				return v
			}
		}
		return ""
	}
	cfg := blob.S3Config{
		Endpoint: env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"), Region: env("AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKey: env("AWS_ACCESS_KEY_ID"), SecretKey: env("AWS_SECRET_ACCESS_KEY"), SessionToken: env("AWS_SESSION_TOKEN"),
		PathStyle: "auto",
	}
	s3, err := s3blob.New(cfg)
	if err != nil {
		return fmt.Errorf("reach S3 for %s: %w", path, err)
	}
	blob.Default.S3, blob.Default.S3Config = s3, &cfg
	return nil
}

// keyFilter picks one key's entries of one state.
type keyFilter struct {
	state string
	key   []byte
}

// entries calls fn for every keyed entry and list item of vertex v's
// subtasks; with one, only for the entries of one key, read from the
// subtask that owns its key group as little of it as its format allows
// (state.ReadKey).
func (cp *checkpoint) entries(v string, one *keyFilter, fn func(st *weirv1.SubtaskState, e dumpEntry) error) error {
	tmp, err := os.MkdirTemp("", "weir-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	maxP := int(cp.md.GetMaxParallelism())
	kg := -1
	if one != nil {
		kg = keygroup.Of(one.key, maxP)
	}
	for _, st := range cp.subtasks[v] {
		if r := st.GetKeyGroups(); kg >= 0 && (kg < int(r.GetStart()) || kg > int(r.GetEnd())) {
			continue
		}
		emit := func(e state.Entry) error {
			kind := "value"
			if e.Map {
				kind = "map"
			}
			return fn(st, dumpEntry{State: e.State, Kind: kind, KeyGroup: &e.KeyGroup, key: e.Key, userKey: e.UserKey, value: e.Value, keyed: true})
		}
		var err error
		if one != nil {
			err = state.ReadKey(st, maxP, tmp, one.state, one.key, emit)
		} else {
			err = state.ReadEntries(st, maxP, tmp, emit)
		}
		if err != nil {
			return fmt.Errorf("vertex %s subtask %d: %w", v, st.GetSubtaskIndex(), err)
		}
		if one != nil {
			continue
		}
		lists, err := state.ReadOperatorLists(st)
		if err != nil {
			return err
		}
		for _, l := range lists {
			kind := "list"
			if l.GetUnion() {
				kind = "union"
			}
			for i, it := range l.GetItems() {
				if err := fn(st, dumpEntry{State: l.GetName(), Kind: kind, Index: &i, value: it}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// dumpEntry is one line of `weir state dump`.
type dumpEntry struct {
	Vertex     string `json:"vertex"`
	Subtask    int32  `json:"subtask"`
	State      string `json:"state"`
	Kind       string `json:"kind"`
	KeyGroup   *int   `json:"key_group,omitempty"`
	Index      *int   `json:"index,omitempty"`
	Key        string `json:"key,omitempty"`
	KeyB64     string `json:"key_b64,omitempty"`
	UserKey    string `json:"user_key,omitempty"`
	UserKeyB64 string `json:"user_key_b64,omitempty"`
	Value      string `json:"value,omitempty"`
	ValueB64   string `json:"value_b64"`

	key, userKey, value []byte
	keyed               bool
}

func (e *dumpEntry) fill() {
	text := func(b []byte) string {
		if utf8.Valid(b) {
			return string(b)
		}
		return ""
	}
	b64 := base64.StdEncoding.EncodeToString
	if e.keyed {
		e.Key, e.KeyB64 = text(e.key), b64(e.key)
		if e.Kind == "map" {
			e.UserKey, e.UserKeyB64 = text(e.userKey), b64(e.userKey)
		}
	}
	e.Value, e.ValueB64 = text(e.value), b64(e.value)
}

func (a *app) dump(path string, o dumpOptions) error {
	if o.format != "jsonl" && o.format != "csv" {
		return usageErrorf("--format %q: want jsonl or csv", o.format)
	}
	cp, err := a.openCheckpoint(path)
	if err != nil {
		return err
	}
	vertices := cp.vertices
	if o.vertex != "" {
		if _, ok := cp.subtasks[o.vertex]; !ok {
			return fmt.Errorf("%s has no vertex %q: it has %s", path, o.vertex, strings.Join(cp.vertices, ", "))
		}
		vertices = []string{o.vertex}
	}
	var cw *csv.Writer
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	if o.format == "csv" {
		cw = csv.NewWriter(a.stdout)
		if err := cw.Write([]string{"vertex", "subtask", "state", "kind", "key_group", "index", "key_b64", "user_key_b64", "value_b64"}); err != nil {
			return err
		}
	}
	found, states := 0, map[string]bool{}
	var one *keyFilter
	if o.keyed {
		one = &keyFilter{state: o.state, key: o.key}
	}
	for _, v := range vertices {
		err := cp.entries(v, one, func(st *weirv1.SubtaskState, e dumpEntry) error {
			states[e.State] = true
			if o.state != "" && e.State != o.state || o.keyed && (!e.keyed || !bytes.Equal(e.key, o.key)) {
				return nil
			}
			found++
			e.Vertex, e.Subtask = v, st.GetSubtaskIndex()
			e.fill()
			if cw == nil {
				return enc.Encode(e)
			}
			return cw.Write([]string{e.Vertex, strconv.Itoa(int(e.Subtask)), e.State, e.Kind, optInt(e.KeyGroup), optInt(e.Index), e.KeyB64, e.UserKeyB64, e.ValueB64})
		})
		if err != nil {
			return err
		}
	}
	if cw != nil {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	}
	if o.state != "" && !states[o.state] && !o.keyed {
		names := slices.Sorted(maps.Keys(states))
		return fmt.Errorf("%s has no state %q%s: it has %s", path, o.state, ofVertex(o.vertex), strings.Join(names, ", "))
	}
	if o.keyed && found == 0 {
		return fmt.Errorf("key %q has no entries in state %q of vertex %q", o.key, o.state, o.vertex)
	}
	return nil
}

func optInt(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func ofVertex(v string) string {
	if v == "" {
		return ""
	}
	return " in vertex " + strconv.Quote(v)
}

// stateListing is what `weir state ls` prints.
type stateListing struct {
	Path           string         `json:"path"`
	CheckpointID   int64          `json:"checkpoint_id"`
	Type           string         `json:"type"`
	JobID          string         `json:"job_id"`
	MaxParallelism int32          `json:"max_parallelism"`
	Vertices       []vertexStates `json:"vertices"`
}

type vertexStates struct {
	Name         string       `json:"name"`
	Subtasks     int          `json:"subtasks"`
	Parallelism  int32        `json:"parallelism"`
	KeyGroups    [2]int32     `json:"key_groups"`
	StateBytes   int64        `json:"state_bytes"`
	ChannelState bool         `json:"channel_state,omitempty"`
	States       []stateSizes `json:"states"`
}

type stateSizes struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Keys    int    `json:"keys"`
	Entries int    `json:"entries"`
	Bytes   int    `json:"bytes"`
}

func (cp *checkpoint) list() (*stateListing, error) {
	typ := strings.ToLower(strings.TrimPrefix(cp.md.GetType().String(), "CHECKPOINT_TYPE_"))
	ls := &stateListing{Path: cp.path, CheckpointID: cp.md.GetCheckpointId(), Type: typ, JobID: cp.md.GetJobId(), MaxParallelism: cp.md.GetMaxParallelism()}
	for _, v := range cp.vertices {
		sts := cp.subtasks[v]
		vs := vertexStates{Name: v, Subtasks: len(sts), Parallelism: sts[0].GetParallelism(), KeyGroups: [2]int32{-1, -1}, States: []stateSizes{}}
		for _, st := range sts {
			kg := st.GetKeyGroups()
			if vs.KeyGroups[0] < 0 || kg.GetStart() < vs.KeyGroups[0] {
				vs.KeyGroups[0] = kg.GetStart()
			}
			vs.KeyGroups[1] = max(vs.KeyGroups[1], kg.GetEnd())
			vs.StateBytes += st.GetStateSize()
			vs.ChannelState = vs.ChannelState || storage.HasState(st.GetChannelState())
		}
		sizes := map[[2]string]*stateSizes{}
		keys := map[[2]string]map[string]bool{}
		err := cp.entries(v, nil, func(_ *weirv1.SubtaskState, e dumpEntry) error {
			id := [2]string{e.State, e.Kind}
			s := sizes[id]
			if s == nil {
				s = &stateSizes{Name: e.State, Kind: e.Kind}
				sizes[id] = s
				keys[id] = map[string]bool{}
			}
			s.Entries++
			s.Bytes += len(e.key) + len(e.userKey) + len(e.value)
			if e.keyed {
				keys[id][string(e.key)] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for id, s := range sizes {
			s.Keys = len(keys[id])
			vs.States = append(vs.States, *s)
		}
		slices.SortFunc(vs.States, func(x, y stateSizes) int {
			return strings.Compare(x.Name+"\x00"+x.Kind, y.Name+"\x00"+y.Kind)
		})
		ls.Vertices = append(ls.Vertices, vs)
	}
	return ls, nil
}

func (ls *stateListing) writeTable(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%s %d of job %s, max parallelism %d\n\n", ls.Type, ls.CheckpointID, ls.JobID, ls.MaxParallelism); err != nil {
		return err
	}
	t := newTable(w)
	t.row("VERTEX", "SUBTASKS", "KEY GROUPS", "STATE", "KIND", "KEYS", "ENTRIES", "BYTES")
	for _, v := range ls.Vertices {
		groups := fmt.Sprintf("%d-%d", v.KeyGroups[0], v.KeyGroups[1])
		sub := strconv.Itoa(v.Subtasks)
		if v.ChannelState {
			sub += " (in-flight records)"
		}
		if len(v.States) == 0 {
			t.row(v.Name, sub, groups, "-", "", "", "", "")
		}
		for _, s := range v.States {
			keys := "-"
			if s.Kind == "value" || s.Kind == "map" {
				keys = strconv.Itoa(s.Keys)
			}
			t.row(v.Name, sub, groups, s.Name, s.Kind, keys, strconv.Itoa(s.Entries), strconv.Itoa(s.Bytes))
		}
	}
	return t.flush()
}
