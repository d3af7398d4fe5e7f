package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

type format int

const (
	formatTable format = iota
	formatJSON
)

func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "table", "output format: table or json")
}

func parseFormat(s string) (format, error) {
	switch s {
	case "table":
		return formatTable, nil
	case "json":
		return formatJSON, nil
	}
	return 0, usageErrorf("invalid output format %q (want table or json)", s)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// writeTriggered prints ID and path tab-separated, which both reads well
// and splits with `read id path` or cut.
func writeTriggered(w io.Writer, id int64, path string) error {
	_, err := fmt.Fprintf(w, "%d\t%s\n", id, path)
	return err
}

// table accumulates rows for text/tabwriter and remembers the first write
// error so that rendering code stays linear.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

func (t *table) row(cells ...any) {
	if t.err != nil {
		return
	}
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	_, t.err = fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() error {
	if t.err != nil {
		return fmt.Errorf("write table: %w", t.err)
	}
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
