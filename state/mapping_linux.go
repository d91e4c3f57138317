package state

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
)

// mappingAt reads /proc/self/smaps for the map that starts at addr.
func mappingAt(addr uintptr) (Mapping, bool, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return Mapping{}, false, err
	}
	defer f.Close()
	return parseSmaps(f, addr)
}

// parseSmaps finds the map starting at addr in an smaps listing: a header
// line "start-end perms offset dev inode path" per map, then "Key: N kB"
// lines, among them Size (the map's length) and Rss (its resident pages).
func parseSmaps(r io.Reader, addr uintptr) (Mapping, bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var m Mapping
	in, found := false, false
	for sc.Scan() {
		line := sc.Bytes()
		if start, ok := smapsStart(line); ok {
			if found {
				break
			}
			in = start == uint64(addr)
			found = in
			continue
		}
		if !in {
			continue
		}
		key, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(key) {
		case "Size":
			dst = &m.Mapped
		case "Rss":
			dst = &m.Resident
		default:
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
		if err != nil {
			return Mapping{}, false, err
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		return Mapping{}, false, err
	}
	return m, found, nil
}

// smapsStart parses the start address of a map's header line
// ("hex-hex perms ..."); ok is false for the other lines ("Key: N kB").
func smapsStart(line []byte) (start uint64, ok bool) {
	i := bytes.IndexByte(line, '-')
	if i <= 0 || bytes.IndexByte(line[:i], ':') >= 0 {
		return 0, false
	}
	start, err := strconv.ParseUint(string(line[:i]), 16, 64)
	return start, err == nil
}

// dropPages drops the pages of the map [addr, addr+size) from this
// process's RSS (madvise MADV_DONTNEED); a shared file map's contents stay
// in the file and the page cache.
func dropPages(addr uintptr, size int64) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, uintptr(size), syscall.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
