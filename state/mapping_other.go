//go:build !linux

package state

func mappingAt(uintptr) (Mapping, bool, error) { return Mapping{}, false, errNoMapping }

func dropPages(uintptr, int64) error { return errNoMapping }
