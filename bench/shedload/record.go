package shedload

import (
	"context"
	"sync"
	"time"
)

// Attempt is what the server saw of one attempt of a logical request; its
// times are offsets from the start of the run.
type Attempt struct {
	ID         uint64        // the logical request
	N          int           // the attempt's number as its header says, 1 for a first attempt
	Arrived    time.Duration // when it reached the server, before any shedding
	Ended      time.Duration // when its handler returned
	Answered   time.Duration // when the status line was written
	Status     int           // the HTTP status sent (gRPC: the code, 200 for OK); 0 when nothing was written
	RetryAfter time.Duration // the Retry-After sent with the status, -1 when none
	Admitted   bool          // whether the shedding let it through to the pool
	Served     bool          // whether a worker served it (false: its caller left the queue)
}

// Recorder collects the attempts a server sees. It is safe for concurrent
// use; the zero Recorder is not usable (use NewRecorder).
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	all   []*Attempt
}

// NewRecorder returns a recorder whose offsets count from start.
func NewRecorder(start time.Time) *Recorder {
	return &Recorder{start: start}
}

// since is the offset of now from the start of the run.
func (r *Recorder) since() time.Duration { return time.Since(r.start) }

// Arrive records the arrival of attempt n of request id and returns ctx
// carrying the attempt, for Admit, Answer and Serve to fill in; End closes
// it.
func (r *Recorder) Arrive(ctx context.Context, id uint64, n int) (context.Context, *Attempt) {
	a := &Attempt{ID: id, N: max(n, 1), Arrived: r.since(), RetryAfter: -1}
	return context.WithValue(ctx, attemptKey{}, a), a
}

// Answer records the status sent for a, with its Retry-After (negative:
// none).
func (r *Recorder) Answer(a *Attempt, status int, retryAfter time.Duration) {
	if a.Status != 0 {
		return
	}
	a.Status, a.RetryAfter, a.Answered = status, retryAfter, r.since()
}

// End records the end of a's handler and keeps a.
func (r *Recorder) End(a *Attempt) {
	a.Ended = r.since()
	r.mu.Lock()
	r.all = append(r.all, a)
	r.mu.Unlock()
}

// Serve is the handler's work behind any shedding: it marks the attempt in
// ctx admitted and serves it from pool, reporting whether it was served.
func Serve(ctx context.Context, pool *Pool) bool {
	a, _ := ctx.Value(attemptKey{}).(*Attempt)
	if a != nil {
		a.Admitted = true
	}
	ok := pool.Serve(ctx)
	if a != nil {
		a.Served = ok
	}
	return ok
}

// attempts returns every attempt ended so far.
func (r *Recorder) attempts() []*Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Attempt(nil), r.all...)
}

// attemptKey is the context key of an attempt being recorded.
type attemptKey struct{}
