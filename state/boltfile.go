package state

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk meta page, read by checkTruncated before bbolt maps the
// file. bbolt writes it in the machine's byte order: a page header of 16
// bytes, then magic, version, page size, flags (uint32 each), the root bucket
// (two uint64), the freelist page, the high-water mark page id, the txid, and
// an FNV-64a checksum of everything from magic to txid.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltMetaOffset  = 16 // the page header
	boltMetaSumLen  = 56 // bytes of meta covered by the checksum
	boltMetaPgidOff = 40 // high-water mark, from the start of meta
	boltMinPageSize = 512
)

// checkTruncated returns an error wrapping ErrNotDatabase when a valid bbolt
// meta page of the file at path claims more pages than the file holds. bbolt
// would map the missing pages and die of SIGBUS reading them, and even with
// the fault recovered its mapping keeps the file locked until the process
// exits. A file too short or malformed to tell passes: bbolt reports it.
func checkTruncated(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt reports it with its own context
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	size := fi.Size()
	metaAt := func(off int64) (pageSize uint32, pages uint64, ok bool) {
		var b [boltMetaOffset + boltMetaSumLen + 8]byte
		if _, err := f.ReadAt(b[:], off); err != nil && err != io.EOF {
			return 0, 0, false
		}
		m := b[boltMetaOffset:]
		ne := binary.NativeEndian
		h := fnv.New64a()
		_, _ = h.Write(m[:boltMetaSumLen])
		if ne.Uint32(m[0:]) != boltMagic || ne.Uint32(m[4:]) != boltVersion ||
			ne.Uint64(m[boltMetaSumLen:]) != h.Sum64() {
			return 0, 0, false
		}
		return ne.Uint32(m[8:]), ne.Uint64(m[boltMetaPgidOff:]), true
	}
	pageSize, pages, ok := metaAt(0)
	if !ok || pageSize < boltMinPageSize {
		return nil
	}
	check := func(ps uint32, n uint64) error {
		if need := uint64(ps) * n; need > uint64(size) {
			return fmt.Errorf("state: open database %s: %w (truncated: %d bytes, its meta page claims %d)",
				path, ErrNotDatabase, size, need)
		}
		return nil
	}
	if err := check(pageSize, pages); err != nil {
		return err
	}
	if ps1, pages1, ok := metaAt(int64(pageSize)); ok {
		return check(ps1, pages1)
	}
	return nil
}
