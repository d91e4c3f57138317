//go:build race

package rewrite

// raceEnabled: the race detector slows tokenizing about 5x, so the
// corpus-wide counting tests check fewer files under it.
const raceEnabled = true
