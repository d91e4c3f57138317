//go:build !race

package proxy

// raceEnabled: see badinput_race_test.go.
const raceEnabled = false
