//go:build race

package jsonvalid

// raceEnabled scales down the heaviest tests under the (much slower) race
// detector.
const raceEnabled = true
