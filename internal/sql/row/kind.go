package row

import "fmt"

// Kind is what a row of a changelog stream does to the result it belongs
// to (Flink's RowKind): a query whose results update (an unbounded GROUP
// BY, a TopN) emits each change as the rows it removes and adds. Between
// SQL operators a changelog record's value is the kind's byte, then the
// row's encoding.
type Kind byte

const (
	// Insert adds a row.
	Insert Kind = iota
	// UpdateBefore removes a row that the UpdateAfter following it, of
	// the same key, replaces.
	UpdateBefore
	// UpdateAfter adds the row replacing the UpdateBefore before it.
	UpdateAfter
	// Delete removes a row.
	Delete
)

var kindNames = [...]string{Insert: "+I", UpdateBefore: "-U", UpdateAfter: "+U", Delete: "-D"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Adds reports whether a row of kind k adds to the result (Insert,
// UpdateAfter); the others retract.
func (k Kind) Adds() bool { return k == Insert || k == UpdateAfter }

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool { return k <= Delete }

// SplitKind is a changelog record value's kind and row encoding.
func SplitKind(v []byte) (Kind, []byte, error) {
	if len(v) == 0 || !Kind(v[0]).Valid() {
		return 0, nil, fmt.Errorf("changelog record without a valid row kind")
	}
	return Kind(v[0]), v[1:], nil
}
