//go:build race

package e2e

// raceEnabled makes the daemons under test race-instrumented too.
const raceEnabled = true
