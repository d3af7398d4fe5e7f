//go:build race

package docs

// raceEnabled: the test runs with the race detector, and builds the
// commands it runs the same way.
const raceEnabled = true
