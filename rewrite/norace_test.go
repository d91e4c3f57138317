//go:build !race

package rewrite

// raceEnabled: see race_test.go.
const raceEnabled = false
