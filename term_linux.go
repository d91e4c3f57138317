package main

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminalFile asks the terminal driver (TCGETS): a character device is
// not enough, /dev/null is one too, and a daemon whose stderr is /dev/null
// (2>/dev/null, systemd's StandardError=null) formatted every line for
// people for nothing.
func isTerminalFile(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
