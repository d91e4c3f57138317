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

// A db larger than the bound does not keep all of itself in RSS: once its
// records were read (their pages faulted into the map), trimming drops the
// resident pages to within the bound, and every record still reads back.
func TestDBMapKeepsWithinItsResidentBound(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the resident pages of a map are read from /proc/self/smaps")
	}
	const bound = 256 << 10
	path := filepath.Join(t.TempDir(), "ctxpress.db")
	s := openTestBolt(t, path, BoltOptions{SweepInterval: -1, MapResident: -1})
	bs := boltOf(s)
	var keys []Key
	for i := range 300 {
		key := NewKey([]byte("Bearer k"), "conv-"+strings.Repeat("x", i%7)+string(rune('A'+i%50))+string(rune('a'+i/50)))
		keys = append(keys, key)
		mustUpdate(t, s, key, func(r *Record) error {
			r.Model = strings.Repeat("m", 4000)
			return nil
		})
	}
	bs.records.clear(0) // read the file, not the decoded records
	for _, k := range keys {
		mustGet(t, s, k)
	}
	before, err := bs.Mapping()
	if err != nil {
		t.Fatal(err)
	}
	if before.Resident <= bound {
		t.Fatalf("the test did not fill the map: %d resident bytes", before.Resident)
	}
	dropped, err := bs.trimMapping(bound)
	if err != nil || !dropped {
		t.Fatalf("trimMapping: dropped %v, %v", dropped, err)
	}
	after, err := bs.Mapping()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resident %d → %d bytes of a %d-byte map", before.Resident, after.Resident, after.Mapped)
	if after.Resident > bound {
		t.Errorf("after trimming, %d bytes resident; bound %d", after.Resident, bound)
	}
	bs.records.clear(0)
	for _, k := range keys {
		if rec := mustGet(t, s, k); len(rec.Model) != 4000 {
			t.Fatalf("record %s read back wrong after the trim", k)
		}
	}
	if dropped, err := bs.trimMapping(1 << 40); dropped || err != nil {
		t.Errorf("a db within the bound was trimmed: %v, %v", dropped, err)
	}
}
