// Package logline is the process log's output: zerolog events buffered in
// memory and written by a background goroutine, as JSON or in console
// form, so that a request's log line costs an append, never a write
// syscall or a formatting pass on the request's own goroutine.
package logline

import (
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Options tune a Writer; the zero value is the defaults.
type Options struct {
	// Console writes the console form (AppendConsole) instead of the JSON
	// events as zerolog wrote them; Color adds ANSI colors to it.
	Console, Color bool
	// FlushBytes: a buffer that holds this much is written at once
	// (default 8 KiB). Interval: a line waits at most this long otherwise
	// (default 100 ms). Warn and error lines are written at once.
	FlushBytes int
	Interval   time.Duration
	// MaxPending bounds the bytes waiting for the output (default 4 MiB).
	// A line that would go beyond it is dropped and counted, and the next
	// write says how many were lost: a stuck or slow stderr never blocks a
	// request, and never grows the heap without bound.
	MaxPending int
}

// Writer is a zerolog.LevelWriter that buffers lines for a background
// goroutine. Lines keep the order they were written in. Close writes what
// is pending and stops the goroutine; after a SIGKILL what is lost is what
// was pending, at most one Interval of lines.
type Writer struct {
	out  io.Writer
	opts Options

	mu      sync.Mutex
	buf     []byte // lines not yet handed to the flusher
	urgent  bool   // a warn/error line or FlushBytes are waiting
	dropped int64  // lines dropped since the last flush
	lost    int64  // lines dropped in all
	closed  bool
	once    sync.Once

	wake    chan struct{}
	quit    chan struct{}
	stopped chan struct{}
	spare   []byte // the flusher's: last swapped-out buffer, reused
	outBuf  []byte // the flusher's: the console form of a batch
}

// New starts a Writer that writes to out.
func New(out io.Writer, o Options) *Writer {
	if o.FlushBytes <= 0 {
		o.FlushBytes = 8 << 10
	}
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 4 << 20
	}
	w := &Writer{out: out, opts: o, wake: make(chan struct{}, 1),
		quit: make(chan struct{}), stopped: make(chan struct{})}
	go w.loop()
	return w
}

// Write buffers one event of unknown level (written within Interval).
func (w *Writer) Write(p []byte) (int, error) { return w.WriteLevel(zerolog.NoLevel, p) }

// WriteLevel buffers one event; warn and above are flushed at once. It
// never blocks on the output.
func (w *Writer) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		// After Close (the last lines of a shutdown): written directly.
		defer w.mu.Unlock()
		w.outBuf = w.format(w.outBuf[:0], p)
		_, err := w.out.Write(w.outBuf)
		return len(p), err
	}
	if len(w.buf)+len(p) > w.opts.MaxPending {
		w.dropped++
		w.lost++
		w.mu.Unlock()
		return len(p), nil
	}
	first := len(w.buf) == 0
	w.buf = append(w.buf, p...)
	nowUrgent := !w.urgent && ((l >= zerolog.WarnLevel && l < zerolog.NoLevel) || len(w.buf) >= w.opts.FlushBytes)
	if nowUrgent {
		w.urgent = true
	}
	w.mu.Unlock()
	if first || nowUrgent {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Dropped is the number of lines dropped because the output could not keep
// up with MaxPending.
func (w *Writer) Dropped() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// Close writes every pending line and stops the flusher; later writes go
// straight to the output. It returns once the output has taken the lines.
func (w *Writer) Close() error {
	w.once.Do(func() { close(w.quit) })
	<-w.stopped
	return nil
}

func (w *Writer) loop() {
	defer close(w.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-w.wake:
		case <-w.quit:
			w.flush(true)
			return
		}
		w.mu.Lock()
		urgent := w.urgent
		w.mu.Unlock()
		if !urgent {
			// Let the first line wait for company, at most Interval.
			timer.Reset(w.opts.Interval)
			select {
			case <-timer.C:
			case <-w.wake:
				timer.Stop()
			case <-w.quit:
				timer.Stop()
				w.flush(true)
				return
			}
		}
		w.flush(false)
	}
}

// flush hands the pending lines to the output, the mutex held only for the
// swap; final marks the Writer closed in the same swap, so that no line
// written meanwhile is left behind.
func (w *Writer) flush(final bool) {
	w.mu.Lock()
	batch, dropped := w.buf, w.dropped
	w.buf, w.spare = w.spare[:0], nil
	w.dropped, w.urgent = 0, false
	if final {
		w.closed = true
		// Writes after Close share outBuf under the mutex.
		defer w.mu.Unlock()
	} else {
		w.mu.Unlock()
	}
	if dropped > 0 {
		batch = append(batch, droppedEvent(dropped)...)
	}
	whole := batch
	if len(batch) > 0 {
		if w.opts.Console {
			w.outBuf = w.outBuf[:0]
			for len(batch) > 0 {
				n := indexNewline(batch)
				w.outBuf = AppendConsole(w.outBuf, batch[:n], w.opts.Color)
				batch = batch[n:]
			}
			_, _ = w.out.Write(w.outBuf)
		} else {
			_, _ = w.out.Write(batch)
		}
	}
	if !final {
		w.mu.Lock()
		if w.spare == nil && cap(whole) <= maxSpare {
			w.spare = whole[:0]
		}
		w.mu.Unlock()
	}
}

// maxSpare bounds the buffer kept for reuse after a burst.
const maxSpare = 256 << 10

// format is one line's output form.
func (w *Writer) format(dst, p []byte) []byte {
	if w.opts.Console {
		return AppendConsole(dst, p, w.opts.Color)
	}
	return append(dst, p...)
}

// indexNewline is the length of the first line of b, its newline included.
func indexNewline(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i + 1
		}
	}
	return len(b)
}

// droppedEvent is the line that says lines were lost, as zerolog writes one.
func droppedEvent(n int64) []byte {
	b := []byte(`{"level":"warn","dropped":`)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `,"time":"`...)
	b = time.Now().AppendFormat(b, zerolog.TimeFieldFormat)
	return append(b, `","message":"log output could not keep up; lines dropped"}`+"\n"...)
}
