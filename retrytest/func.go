package retrytest

import (
	"context"
	"sync"
	"time"

	"github.com/steadyhq/retry"
)

// Call records one call of a scripted function.
type Call struct {
	Attempt int       // retry.AttemptFrom the call's context: 1 for the first
	Time    time.Time // when the call started (virtual time in a synctest bubble)
	Err     error     // what the call returned
}

// Func is a scripted function for retry.Do and retry.Run: its calls fail
// with the scripted errors in order, then return its value, and are
// recorded. Build it with NewFunc or FailN. A Func is safe for concurrent
// use; the zero Func succeeds at once with the zero value.
type Func[T any] struct {
	mu    sync.Mutex
	errs  []error
	value T
	calls []Call
}

// NewFunc returns a Func whose first calls fail with errs, one error per
// call in order, and whose later calls return value. A nil error in errs is
// a call that succeeds.
func NewFunc[T any](value T, errs ...error) *Func[T] {
	return &Func[T]{errs: append([]error(nil), errs...), value: value}
}

// FailN returns a Func whose first n calls fail with err and whose later
// calls return value.
func FailN[T any](n int, err error, value T) *Func[T] {
	errs := make([]error, max(n, 0))
	for i := range errs {
		errs[i] = err
	}
	return &Func[T]{errs: errs, value: value}
}

// Do is the scripted function, of the shape retry.Do takes:
//
//	f := retrytest.FailN(2, io.ErrUnexpectedEOF, "ok")
//	v, err := retry.Do(ctx, f.Do, opts...)
func (f *Func[T]) Do(ctx context.Context) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := Call{Attempt: retry.AttemptFrom(ctx), Time: time.Now()}
	if n := len(f.calls); n < len(f.errs) {
		c.Err = f.errs[n]
	}
	f.calls = append(f.calls, c)
	if c.Err != nil {
		var zero T
		return zero, c.Err
	}
	return f.value, nil
}

// Run is Do for retry.Run.
func (f *Func[T]) Run(ctx context.Context) error {
	_, err := f.Do(ctx)
	return err
}

// Calls returns the calls made so far, in order.
func (f *Func[T]) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Count returns the number of calls made so far.
func (f *Func[T]) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// Waits returns the time between the starts of consecutive calls: the
// waits the retry engine chose, plus the calls' own durations. In a
// synctest bubble they are exact.
func (f *Func[T]) Waits() []time.Duration {
	return waits(f.Calls(), func(c Call) time.Time { return c.Time })
}

func waits[E any](calls []E, at func(E) time.Time) []time.Duration {
	if len(calls) < 2 {
		return nil
	}
	w := make([]time.Duration, len(calls)-1)
	for i := range w {
		w[i] = at(calls[i+1]).Sub(at(calls[i]))
	}
	return w
}
