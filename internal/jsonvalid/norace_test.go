//go:build !race

package jsonvalid

const raceEnabled = false
