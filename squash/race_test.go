//go:build race

package squash

// raceEnabled scales down the heaviest corpus tests under the (much slower)
// race detector.
const raceEnabled = true
