package state

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The db's map is a figure a user can watch: on Linux the bolt store
// reports the address space bbolt mapped for the file (at least the file)
// and the pages of it in RSS, which grow as records are read and written
// and never exceed the map.
func TestDBMappingIsReportedWithinTheFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the resident pages of a map are read from /proc/self/smaps")
	}
	path := filepath.Join(t.TempDir(), "ctxpress.db")
	s := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	m0, err := s.(Mapper).Mapping()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		key := NewKey([]byte("Bearer k"), strings.Repeat("c", 8)+string(rune('a'+i%26))+strings.Repeat("x", i%50))
		mustUpdate(t, s, key, func(r *Record) error {
			r.Model = strings.Repeat("m", 2000) // a record of a few KiB
			return nil
		})
	}
	m, err := s.(Mapper).Mapping()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("map %d bytes, %d resident (at open: %d, %d); file %d bytes", m.Mapped, m.Resident, m0.Mapped, m0.Resident, fi.Size())
	if m.Mapped < fi.Size() {
		t.Errorf("the map (%d bytes) is smaller than the file (%d)", m.Mapped, fi.Size())
	}
	if m.Resident <= 0 || m.Resident > m.Mapped {
		t.Errorf("resident %d bytes of a %d-byte map", m.Resident, m.Mapped)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.(Mapper).Mapping(); !errors.Is(err, ErrClosed) {
		t.Errorf("Mapping after Close: %v, want ErrClosed", err)
	}
}
