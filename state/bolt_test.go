package state

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ctxpress/ctxpress/history"
)

func TestBoltSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	clock := newClock()
	opts := BoltOptions{Now: clock.Now, SweepInterval: -1}

	s, err := OpenBolt(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := mustUpdate(t, s, keyA, func(r *Record) error { *r = fullRecord(keyA); return nil })
	clock.Advance(time.Minute)
	mustUpdate(t, s, keyB, func(r *Record) error {
		r.PutLine(Line{ID: hashOf("l"), Numbers: history.Numbers{Calibration: history.Calibration{LastInput: 4242}}})
		return nil
	})
	before, err := s.List(ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestBolt(t, path, opts)
	if got := mustGet(t, s, keyA); !reflect.DeepEqual(got, want) {
		t.Errorf("after restart Get =\n%+v\nwant\n%+v", got, want)
	}
	if got := mustGet(t, s, keyB); got.CurrentLine().Calibration.LastInput != 4242 {
		t.Errorf("after restart LastInputTokens = %d, want 4242", got.CurrentLine().Calibration.LastInput)
	}
	after, err := s.List(ListOptions{})
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("after restart List differs (err %v)", err)
	}
}

func TestBoltFileLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "state.db")
	s := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("file mode %v, want 0600", perm)
	}
	if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("parent directory: %v, %v; want mode 0700", di.Mode(), err)
	}

	var buckets []string
	err = boltOf(s).db.View(func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(metaSchemaVersion)); v != "2" {
			t.Errorf("schema_version = %q, want 2", v)
		}
		if v := string(tx.Bucket(bucketMeta).Get(metaApp)); v != "ctxpress" {
			t.Errorf("app = %q, want ctxpress", v)
		}
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			buckets = append(buckets, string(name))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(buckets, ","); got != "conversations,meta,originals,turns" {
		t.Errorf("buckets = %s, want conversations,meta,originals,turns", got)
	}
}

// writeFile writes data to a new file in a temporary directory.
func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// validDB returns the bytes of a real ctxpress database with one record.
func validDB(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "valid.db")
	s, err := OpenBolt(path, BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, keyA, func(r *Record) error { *r = fullRecord(keyA); return nil })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestBoltOpenNotADatabase(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	valid := validDB(t)
	corruptMeta := bytes.Clone(valid)
	copy(corruptMeta, garbage(2*4096)) // both meta pages
	cases := []struct {
		name string
		path func(t *testing.T) string
	}{
		{"directory", func(t *testing.T) string { return t.TempDir() }},
		{"text", func(t *testing.T) string { return writeFile(t, []byte("hello, not a database\n")) }},
		{"one byte", func(t *testing.T) string { return writeFile(t, []byte{0}) }},
		{"garbage 4KiB", func(t *testing.T) string { return writeFile(t, garbage(4096)) }},
		{"garbage 10KiB", func(t *testing.T) string { return writeFile(t, garbage(10000)) }},
		{"garbage 1MiB", func(t *testing.T) string { return writeFile(t, garbage(1<<20)) }},
		{"zeros 64KiB", func(t *testing.T) string { return writeFile(t, make([]byte, 64<<10)) }},
		{"corrupt meta pages", func(t *testing.T) string { return writeFile(t, corruptMeta) }},
		{"truncated", func(t *testing.T) string { return writeFile(t, valid[:len(valid)/3]) }},
		{"truncated to the meta pages", func(t *testing.T) string { return writeFile(t, valid[:2*4096]) }},
		{"garbage data pages", func(t *testing.T) string {
			return writeFile(t, append(bytes.Clone(valid[:2*4096]), garbage(len(valid)-2*4096)...))
		}},
		{"zeroed data pages", func(t *testing.T) string {
			return writeFile(t, append(bytes.Clone(valid[:2*4096]), make([]byte, len(valid)-2*4096)...))
		}},
		{"sqlite", func(t *testing.T) string {
			return writeFile(t, append([]byte("SQLite format 3\x00"), make([]byte, 8192)...))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, ro := range []bool{false, true} {
				// A fresh file per open: when bbolt faults on a corrupt page
				// after mapping the file, the mapping keeps it locked.
				path := c.path(t)
				s, err := OpenBolt(path, BoltOptions{ReadOnly: ro, SweepInterval: -1})
				if err == nil {
					s.Close()
					t.Fatalf("OpenBolt(ReadOnly: %v) succeeded", ro)
				}
				if !errors.Is(err, ErrNotDatabase) || !strings.Contains(err.Error(), path) {
					t.Errorf("OpenBolt(ReadOnly: %v) error = %v; want ErrNotDatabase naming the path", ro, err)
				}
			}
		})
	}
}

func TestBoltOpenForeignBoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("widgets"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, ro := range []bool{false, true} {
		if _, err := OpenBolt(path, BoltOptions{ReadOnly: ro}); !errors.Is(err, ErrNotDatabase) {
			t.Errorf("OpenBolt(ReadOnly: %v) of another program's bbolt file = %v, want ErrNotDatabase", ro, err)
		}
	}
}

func TestBoltOpenEmptyBoltFile(t *testing.T) {
	// A bbolt file without buckets (a crash right after creation) is adopted.
	path := filepath.Join(t.TempDir(), "empty.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro := openTestBolt(t, path, BoltOptions{ReadOnly: true})
	if _, ok, err := ro.Get(keyA); ok || err != nil {
		t.Fatalf("read-only Get on an empty file = %v, %v", ok, err)
	}
	if recs, err := ro.List(ListOptions{}); len(recs) != 0 || err != nil {
		t.Fatalf("read-only List on an empty file = %v, %v", recs, err)
	}
	ro.Close()

	s := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
}

// setSchema overwrites the schema version of the database at path.
func setSchema(t *testing.T, path, version string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaSchemaVersion, []byte(version))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBoltSchemaVersion(t *testing.T) {
	for _, c := range []struct {
		version string
		want    error
	}{
		{"3", ErrSchemaTooNew},
		{"99", ErrSchemaTooNew},
		{"", ErrNotDatabase},
		{"zero", ErrNotDatabase},
		{"0", ErrNotDatabase},
		{"1", nil},
		{"2", nil},
	} {
		t.Run(c.version, func(t *testing.T) {
			path := writeFile(t, validDB(t))
			setSchema(t, path, c.version)
			for _, ro := range []bool{false, true} {
				s, err := OpenBolt(path, BoltOptions{ReadOnly: ro, SweepInterval: -1})
				if c.want == nil {
					if err != nil {
						t.Fatalf("OpenBolt(ReadOnly: %v): %v", ro, err)
					}
					mustGet(t, s, keyA)
					s.Close()
					continue
				}
				if !errors.Is(err, c.want) {
					t.Errorf("OpenBolt(ReadOnly: %v) error = %v, want %v", ro, err, c.want)
				}
			}
		})
	}
}

func TestBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	holder, err := OpenBolt(path, BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, holder, keyA, func(*Record) error { return nil })

	for _, ro := range []bool{false, true} {
		var s Store
		var err error
		opened := make(chan struct{})
		go func() {
			defer close(opened)
			s, err = OpenBolt(path, BoltOptions{Timeout: 100 * time.Millisecond, ReadOnly: ro})
		}()
		select {
		case <-opened:
		case <-time.After(30 * time.Second): // a deadlock guard: bbolt without a timeout waits forever
			t.Fatalf("OpenBolt(ReadOnly: %v) never gave up on the held lock", ro)
		}
		if err == nil {
			s.Close()
			t.Fatalf("second OpenBolt(ReadOnly: %v) succeeded while the file is held", ro)
		}
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "no lock after 100ms") {
			t.Errorf("second OpenBolt(ReadOnly: %v) error = %v, want ErrLocked after the 100ms timeout", ro, err)
		}
	}
	if _, err := OpenBolt(path, BoltOptions{Timeout: -1}); !errors.Is(err, ErrLocked) {
		t.Errorf("OpenBolt(Timeout: -1) error = %v, want ErrLocked", err)
	}

	holder.Close()
	s := openTestBolt(t, path, BoltOptions{SweepInterval: -1})
	mustGet(t, s, keyA)
}

// The lock wait is the configured Timeout; 0 is the default, and a
// negative one gives up at once (bbolt's own 0 would wait forever).
func TestLockTimeout(t *testing.T) {
	for _, c := range []struct{ opt, want time.Duration }{
		{0, DefaultLockTimeout},
		{100 * time.Millisecond, 100 * time.Millisecond},
		{-1, time.Nanosecond},
		{-time.Hour, time.Nanosecond},
	} {
		if got := lockTimeout(c.opt); got != c.want {
			t.Errorf("lockTimeout(%v) = %v, want %v", c.opt, got, c.want)
		}
	}
}

func TestBoltReadOnly(t *testing.T) {
	path := writeFile(t, validDB(t))
	r1 := openTestBolt(t, path, BoltOptions{ReadOnly: true})
	r2 := openTestBolt(t, path, BoltOptions{ReadOnly: true}) // readers share the lock
	for _, s := range []Store{r1, r2} {
		mustGet(t, s, keyA)
		if recs, err := s.List(ListOptions{}); err != nil || len(recs) != 1 {
			t.Errorf("List = %d records, %v; want 1", len(recs), err)
		}
	}
	if _, err := r1.Update(keyA, func(*Record) error { return nil }); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Update error = %v, want ErrReadOnly", err)
	}
	if _, err := r1.Delete(keyA); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Delete error = %v, want ErrReadOnly", err)
	}
	if _, err := r1.Sweep(time.Now()); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Sweep error = %v, want ErrReadOnly", err)
	}
}

func TestBoltReadOnlyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	_, err := OpenBolt(path, BoltOptions{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("OpenBolt(missing, ReadOnly) error = %v; want fs.ErrNotExist naming the path", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a read-only open created the file")
	}
}

func TestBoltEmptyPath(t *testing.T) {
	if _, err := OpenBolt("", BoltOptions{}); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("OpenBolt(\"\") error = %v, want fs.ErrInvalid", err)
	}
}

func TestBoltPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root bypasses file permissions; TestClassifyOpenError covers the mapping")
	}
	path := writeFile(t, validDB(t))
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBolt(path, BoltOptions{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("OpenBolt(mode 0) error = %v, want fs.ErrPermission", err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBolt(filepath.Join(dir, "new.db"), BoltOptions{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("OpenBolt(in a read-only directory) error = %v, want fs.ErrPermission", err)
	}
}

func TestClassifyOpenError(t *testing.T) {
	perm := &fs.PathError{Op: "open", Path: "/x/state.db", Err: syscall.EACCES}
	if err := classifyOpenError("/x/state.db", perm, time.Second); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("EACCES classified as %v, want fs.ErrPermission", err)
	}
	other := errors.New("file size too small 10")
	if err := classifyOpenError("/x/state.db", other, time.Second); !errors.Is(err, ErrNotDatabase) || !errors.Is(err, other) {
		t.Errorf("an unknown bbolt error classified as %v, want ErrNotDatabase wrapping it", err)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	for i := range 10 {
		// Each store is closed after its sweep ran at open and on a
		// tick: Close stops a sweeper that is running, not one that has
		// not started.
		bSweeps, mSweeps := sweepCounter(), sweepCounter()
		b, err := OpenBolt(filepath.Join(dir, "state.db"), BoltOptions{SweepInterval: time.Millisecond, OnSweep: bSweeps.swept})
		if err != nil {
			t.Fatal(err)
		}
		m := NewMemoryWithOptions(MemoryOptions{SweepInterval: time.Millisecond, OnSweep: mSweeps.swept})
		for _, s := range []Store{b, m} {
			mustUpdate(t, s, Key{Namespace: "ns", ID: string(rune('a' + i))}, func(*Record) error { return nil })
		}
		bSweeps.wait(2)
		mSweeps.wait(2)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Close waits until the sweep goroutine has closed its done channel;
	// the goroutine itself ends a moment later.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOnSweepReports(t *testing.T) {
	clock := newClock()
	reports := make(chan int, 100)
	s := openTestBolt(t, filepath.Join(t.TempDir(), "state.db"), BoltOptions{
		Now: clock.Now, Retention: time.Hour, SweepInterval: time.Millisecond,
		OnSweep: func(n int, err error) {
			if err != nil {
				t.Errorf("background sweep: %v", err)
			}
			select {
			case reports <- n:
			default:
			}
		},
	})
	mustUpdate(t, s, keyA, func(*Record) error { return nil })
	clock.Advance(2 * time.Hour)
	timeout := time.After(5 * time.Second)
	for {
		select {
		case n := <-reports:
			if n == 1 {
				return
			}
		case <-timeout:
			t.Fatal("OnSweep never reported the deleted record")
		}
	}
}

func TestBoltCorruptedWhileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenBolt(path, BoltOptions{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		mustUpdate(t, s, Key{Namespace: "ns", ID: strings.Repeat("x", i+1)}, func(r *Record) error {
			*r = fullRecord(r.Key)
			return nil
		})
	}
	// Overwrite every page after the two meta pages behind bbolt's back.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	junk := bytes.Repeat([]byte{0xA5}, int(fi.Size())-2*4096)
	if _, err := f.WriteAt(junk, 2*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// Whatever bbolt makes of it, the store answers at once, with values or
	// errors: no panic, no hang. Once bbolt has panicked, everything fails
	// with ErrCorrupt.
	done := make(chan struct{})
	go func() {
		defer close(done)
		checks := map[string]func() error{
			"Get":    func() error { _, _, err := s.Get(Key{Namespace: "ns", ID: "x"}); return err },
			"List":   func() error { _, err := s.List(ListOptions{}); return err },
			"Update": func() error { _, err := s.Update(keyA, func(*Record) error { return nil }); return err },
			"Sweep":  func() error { _, err := s.Sweep(time.Now()); return err },
			"Delete": func() error { _, err := s.Delete(keyA); return err },
		}
		sawCorrupt := false
		for _, op := range []string{"Get", "List", "Update", "Sweep", "Delete", "Get"} {
			err := checks[op]()
			t.Logf("%s: %v", op, err)
			if sawCorrupt && !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s after bbolt panicked: %v, want ErrCorrupt", op, err)
			}
			sawCorrupt = sawCorrupt || errors.Is(err, ErrCorrupt)
		}
		if err := s.Close(); sawCorrupt && !errors.Is(err, ErrCorrupt) {
			t.Errorf("Close after bbolt panicked: %v, want ErrCorrupt", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the store hung on a corrupted file")
	}
}

func TestBoltUpdatePanicPropagates(t *testing.T) {
	s := openTestBolt(t, filepath.Join(t.TempDir(), "state.db"), BoltOptions{SweepInterval: -1})
	testUpdatePanics(t, s)
}

func TestMemoryUpdatePanicPropagates(t *testing.T) {
	s := NewMemoryWithOptions(MemoryOptions{SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	testUpdatePanics(t, s)
}

// testUpdatePanics checks that a panic in fn reaches the caller unchanged,
// writes nothing, and leaves the store usable.
func testUpdatePanics(t *testing.T, s Store) {
	t.Helper()
	type sentinel struct{ n int }
	func() {
		defer func() {
			if p := recover(); p != (sentinel{42}) {
				t.Errorf("recovered %#v, want the caller's panic value", p)
			}
		}()
		s.Update(keyA, func(r *Record) error {
			r.Requests = 1
			panic(sentinel{42})
		})
	}()
	if _, ok, err := s.Get(keyA); ok || err != nil {
		t.Errorf("after a panicking Update: Get = %v, %v; want nothing", ok, err)
	}
	mustUpdate(t, s, keyA, func(r *Record) error { r.Requests = 2; return nil })
}
