//go:build !linux

package main

import "os"

// isTerminalFile says whether f is a character device: a terminal, or
// /dev/null, where the format costs a little CPU and changes nothing.
func isTerminalFile(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
