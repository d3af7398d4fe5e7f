package sinktxn

// Bug is a mistake earlier versions of the machine made, which a build
// with fault points can put back (Reintroduce) so that the Kafka nemesis
// proves it finds each of them. Builds without fault points compile them
// away.
type Bug int

const (
	bugNone Bug = iota
	// bugFenceRestored: a restore fences the transactional IDs whose
	// transactions it just committed, so a second restore of the same
	// checkpoint cannot commit them again and declares them lost.
	bugFenceRestored
	// bugReuseCommitted: a slot is reused as soon as its transaction was
	// committed, while the completed checkpoint still names it: a
	// restore of that checkpoint commits the slot's newer transaction
	// (Kafka before 4) or can never commit (Kafka 4).
	bugReuseCommitted
	// bugCarryForever: a transaction is carried over aborted
	// checkpoints without limit, past the broker's transaction timeout.
	bugCarryForever
)

// Bugs lists what Reintroduce accepts, by name.
var Bugs = map[string]Bug{
	"fence-restored":  bugFenceRestored,
	"reuse-committed": bugReuseCommitted,
	"carry-forever":   bugCarryForever,
}
