//go:build !race

package squash

const raceEnabled = false
