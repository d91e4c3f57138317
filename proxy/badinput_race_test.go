//go:build race

package proxy

// raceEnabled: the race detector slows tokenizing ~5x, so the largest
// bad-input body is smaller under it (CI also runs TestBadInput without it).
const raceEnabled = true
