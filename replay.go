package retry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"time"
)

func readUpTo(r io.Reader, limit int64) ([]byte, bool) {
	if limit < math.MaxInt64 { // limit+1 would wrap
		r = io.LimitReader(r, limit+1)
	}
	b, err := io.ReadAll(r)
	if err != nil || int64(len(b)) > limit {
		return nil, false
	}
	return b, true
}

// replayBody keeps what was read of a request body that has no GetBody, up to
// a limit, so that the body can be sent again. The body is never read ahead:
// it is copied while the base transport streams it. The caller's body is
// closed exactly once: by release when no attempt holds it, otherwise when the
// last attempt's body is closed by the base transport.
type replayBody struct {
	mu       sync.Mutex
	src      io.ReadCloser
	limit    int64
	buf      []byte
	overflow bool  // more than limit bytes were read
	eof      bool  // src is exhausted
	srcErr   error // a read error of src, sticky
	released bool  // the round trip is over
	closed   bool  // src was closed
	cur      *attemptBody
}

func newReplayBody(src io.ReadCloser, limit int64) *replayBody {
	return &replayBody{src: src, limit: limit}
}

// replayable reports whether the body can be sent again: nothing was lost,
// and either the attempt holding the source is done with it or, when it is
// still sending, the rest is known to fit.
func (b *replayBody) replayable(restFits bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.overflow || b.srcErr != nil {
		return false
	}
	return b.eof || b.cur == nil || b.cur.isDone() || restFits
}

// settle waits, at most limit, until the attempt holding the source is done
// with it.
func (b *replayBody) settle(ctx context.Context, limit time.Duration) {
	b.mu.Lock()
	cur := b.cur
	b.mu.Unlock()
	if cur == nil || cur.isDone() {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-cur.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// snapshot returns the bytes kept, and whether they are the whole body.
func (b *replayBody) snapshot() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.overflow {
		return nil, false
	}
	return bytes.Clone(b.buf), b.eof
}

// attempt returns the body for one attempt. It first waits until the base
// transport has closed the previous attempt's body, so that two attempts
// never read the source at once.
func (b *replayBody) attempt(ctx context.Context) (io.ReadCloser, error) {
	b.mu.Lock()
	prev := b.cur
	b.mu.Unlock()
	if prev != nil {
		select {
		case <-prev.done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.overflow || b.srcErr != nil {
		return nil, &notReplayable{errBodyOverLimit}
	}
	b.cur = &attemptBody{b: b, done: make(chan struct{})}
	return b.cur, nil
}

var errBodyOverLimit = errors.New("request body is longer than the replay limit")

// release ends the round trip: the source is closed now if no attempt holds
// it, or when the attempt holding it closes.
func (b *replayBody) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = true
	if b.cur == nil || b.cur.closed {
		b.closeSrc()
	}
}

func (b *replayBody) closeSrc() {
	if !b.closed {
		b.closed = true
		b.src.Close()
		b.buf = nil
	}
}

// attemptBody is the body of one attempt: what was kept, then the rest of the
// source, kept in turn while it fits the limit. The source is read without
// the lock held, so that a Close from another goroutine can interrupt a
// blocked read; done closes once the attempt is closed and no read of it is
// in flight, so two attempts never read the source at once.
type attemptBody struct {
	b       *replayBody
	off     int
	done    chan struct{}
	closed  bool
	reading bool
}

func (a *attemptBody) Read(p []byte) (int, error) {
	b := a.b
	b.mu.Lock()
	switch {
	case a.closed:
		b.mu.Unlock()
		return 0, errReadAfterClose
	case a.off < len(b.buf):
		n := copy(p, b.buf[a.off:])
		a.off += n
		b.mu.Unlock()
		return n, nil
	case b.eof:
		b.mu.Unlock()
		return 0, io.EOF
	case b.srcErr != nil:
		err := b.srcErr
		b.mu.Unlock()
		return 0, err
	}
	a.reading = true
	b.mu.Unlock()

	n, err := b.src.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	a.reading = false
	if n > 0 && !b.overflow {
		if int64(len(b.buf)+n) > b.limit {
			b.overflow = true
			b.buf = nil
		} else {
			b.buf = append(b.buf, p[:n]...)
			a.off = len(b.buf)
		}
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.srcErr = err
	}
	if a.closed {
		a.finish()
	}
	return n, err
}

var errReadAfterClose = errors.New("retry: read of a closed request body")

func (a *attemptBody) Close() error {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	if b.released && b.cur == a {
		b.closeSrc() // interrupts a read in flight
	}
	if !a.reading {
		a.finish()
	}
	return nil
}

// isDone reports whether the attempt is over.
func (a *attemptBody) isDone() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// finish signals that the attempt is over; b.mu is held.
func (a *attemptBody) finish() {
	close(a.done)
	if a.b.released && a.b.cur == a {
		a.b.closeSrc()
	}
}
