package state

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxpress/ctxpress/expand"
)

// OriginalFiles writes originals as plain files, Dir/REF.txt
// (expand.Ways.File), for an agent on this machine to print with sed -n
// or its read tool. Files are 0600 in a 0700 directory: the agent runs as
// the user ctxpress runs as. Bounded like the store: a file not written
// again for Retention goes, then the oldest while the directory holds
// more than MaxBytes.
type OriginalFiles struct {
	Dir       string
	Retention time.Duration // 0: DefaultRetention; <0: kept forever
	MaxBytes  int64         // 0: no cap
}

// OpenOriginalFiles makes dir (and its parents) and checks that a file
// can be written in it: a directory that is not writable is no way back.
func OpenOriginalFiles(dir string, retention time.Duration, maxBytes int64) (*OriginalFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, err
	}
	name := probe.Name()
	probe.Close()
	os.Remove(name)
	return &OriginalFiles{Dir: dir, Retention: retention, MaxBytes: maxBytes}, nil
}

// Write writes each original's file, whole, or renews the age of one
// already there (same reference, same bytes). A file appears complete or
// not at all: it is written aside and renamed into place, so an agent
// never prints half of one.
func (f *OriginalFiles) Write(originals []expand.Original) error {
	var errs []error
	now := time.Now()
	for _, o := range originals {
		if !expand.ValidRef(o.Ref) {
			continue
		}
		path := filepath.Join(f.Dir, o.Ref+".txt")
		if os.Chtimes(path, now, now) == nil {
			continue
		}
		tmp, err := os.CreateTemp(f.Dir, ".write-*")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = tmp.WriteString(o.Text)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			os.Remove(tmp.Name())
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SweepEvery sweeps now and then every interval until stop is called.
func (f *OriginalFiles) SweepEvery(interval time.Duration, failed func(error)) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if _, err := f.Sweep(time.Now()); err != nil && failed != nil {
				failed(err)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}

// Sweep removes the files older than the retention at now, then the
// oldest while the directory holds more than MaxBytes, and leftovers of an
// interrupted write; it returns how many it removed.
func (f *OriginalFiles) Sweep(now time.Time) (int, error) {
	entries, err := os.ReadDir(f.Dir)
	if err != nil {
		return 0, err
	}
	type file struct {
		name string
		at   time.Time
		size int64
	}
	var files []file
	var total int64
	removed := 0
	retention := f.Retention
	if retention == 0 {
		retention = DefaultRetention
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		name := e.Name()
		stale := retention > 0 && now.Sub(info.ModTime()) > retention
		leftover := strings.HasPrefix(name, ".write-") && now.Sub(info.ModTime()) > time.Hour
		if stale || leftover {
			if os.Remove(filepath.Join(f.Dir, name)) == nil {
				removed++
			}
			continue
		}
		if ref, ok := strings.CutSuffix(name, ".txt"); ok && expand.ValidRef(ref) {
			files = append(files, file{name, info.ModTime(), info.Size()})
			total += info.Size()
		}
	}
	if f.MaxBytes > 0 && total > f.MaxBytes {
		slices.SortFunc(files, func(a, b file) int { return a.at.Compare(b.at) })
		for _, fl := range files {
			if total <= f.MaxBytes {
				break
			}
			if err := os.Remove(filepath.Join(f.Dir, fl.name)); err == nil || errors.Is(err, fs.ErrNotExist) {
				total -= fl.size
				removed++
			}
		}
	}
	return removed, nil
}
