package retry

import (
	"context"
	"errors"
	"iter"
)

// Do calls fn until it succeeds or the policy says stop, and returns fn's
// value on success. On failure the error is an *Error whose Err is the last
// attempt's error.
//
// With no options Do uses the process-wide default Retrier (OJS default policy).
// With a *Retrier among the options, Do uses that Retrier's shared state
// (counters, dedup window) and applies the other options to this call only;
// with options but no Retrier, the call gets fresh state. An invalid
// configuration, or a nil ctx, is returned as an error without calling fn.
func Do[T any](ctx context.Context, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	if len(opts) == 0 {
		return do(ctx, &std.cfg, std.cfg.key, fn)
	}
	cfg, key := resolve(opts)
	return do(ctx, cfg, key, fn)
}

// Run is Do for a function that returns only an error.
func Run(ctx context.Context, fn func(context.Context) error, opts ...Option) error {
	if len(opts) == 0 {
		return run(ctx, &std.cfg, std.cfg.key, fn)
	}
	cfg, key := resolve(opts)
	return run(ctx, cfg, key, fn)
}

// Retrier holds a resolved configuration and the state shared by every call
// made through it: counters, the dead-letter alert window, the retry budget,
// breakers and rate limiters. Build it once with New; it is safe for
// concurrent use and never changes afterwards. The zero Retrier, like a nil
// *Retrier, is the process-wide default one that Do and Run use without
// options.
//
// A *Retrier is itself an Option: Do(ctx, fn, r, more...) runs with r's
// configuration and shared state, plus more for that call only. A call
// given r and WithKey alone, the way a call names its dependency, runs on
// r's configuration under that key and builds none of its own, so that
// the configuration costs it no allocation, whatever r's gates.
type Retrier struct {
	cfg config
}

// New returns a Retrier configured by opts. Options are resolved once here.
// A *Retrier among opts contributes its configuration and shares its state
// with the new one. An invalid configuration does not panic: every call made
// through the Retrier returns the configuration error without running fn.
func New(opts ...Option) *Retrier {
	r := &Retrier{}
	r.cfg.build(opts)
	if st := r.cfg.state; st != nil && st.owner == nil {
		st.owner = r
	}
	return r
}

// Run calls fn under r's configuration; see Do.
func (r *Retrier) Run(ctx context.Context, fn func(context.Context) error) error {
	cfg := r.config()
	return run(ctx, cfg, cfg.key, fn)
}

// Err reports the configuration error of r, or nil when r is usable.
func (r *Retrier) Err() error { return r.config().err }

// Policy returns the policy r applies, with defaults filled in. An invalid
// r (Err is not nil), whether for its policy or another option, applies
// none: every call returns the configuration error, and Policy returns the
// zero Policy, whose MaxAttempts of 0 no valid Retrier reports.
func (r *Retrier) Policy() Policy { return r.config().policy }

// Hedge returns the Hedge that WithHedge gave r, with defaults filled in,
// and true; or the zero Hedge and false when r was given none, in which
// case the Transport and the gRPC interceptors do not hedge.
func (r *Retrier) Hedge() (Hedge, bool) {
	if h := r.config().hedge; h != nil {
		return h.Hedge, true
	}
	return Hedge{}, false
}

// Attempts returns an iterator over attempt numbers for loops that are not a
// single function call, such as reconnect loops. The loop body reports the
// attempt's outcome by assigning *errp: the iteration ends when the body
// leaves *errp nil (success) or breaks; otherwise the failure is classified
// and, after the policy's wait, the next attempt is yielded. When the engine
// stops the loop, *errp holds the *Error. A nil errp gives an empty sequence.
//
//	var err error
//	for attempt := range r.Attempts(ctx, &err) {
//		conn, err = dial(ctx, attempt)
//	}
func (r *Retrier) Attempts(ctx context.Context, errp *error) iter.Seq[int] {
	return attempts(ctx, r.config(), errp)
}

// std is the Retrier used by Do and Run without options.
var std Retrier

func init() { std.cfg.build(nil) }

// config returns r's configuration; a nil or zero Retrier means the
// default one.
func (r *Retrier) config() *config {
	if r == nil || r.cfg.state == nil {
		return &std.cfg
	}
	return &r.cfg
}

// resolve returns the configuration for one call, and the call's key. A
// *Retrier with WithKey alone, the way a caller names each call's
// dependency, runs on the Retrier's configuration under that key: the
// configuration those two options build is the Retrier's with the key
// set, and building it would cost every call allocations that grow with
// the Retrier's gates.
func resolve(opts []Option) (*config, string) {
	switch len(opts) {
	case 0:
		return &std.cfg, std.cfg.key
	case 1:
		if r, ok := opts[0].(*Retrier); ok {
			c := r.config()
			return c, c.key
		}
	case 2:
		r, k, ok := retrierKey(opts[0], opts[1])
		if !ok {
			r, k, ok = retrierKey(opts[1], opts[0])
		}
		// An empty key leaves events the Retrier's key where the options
		// built would leave them none: those are built.
		if ok && (k != "" || r.config().key == "") {
			return r.config(), string(k)
		}
	}
	c := new(config)
	c.build(opts)
	return c, c.key
}

// retrierKey reports whether a is a non-nil *Retrier and b a WithKey.
func retrierKey(a, b Option) (*Retrier, keyOption, bool) {
	r, ok1 := a.(*Retrier)
	k, ok2 := b.(keyOption)
	return r, k, ok1 && ok2 && r != nil
}

var (
	errNilFunc    = errors.New("retry: fn is nil")
	errNilContext = errors.New("retry: nil Context")
)

func do[T any](ctx context.Context, cfg *config, key string, fn func(context.Context) (T, error)) (T, error) {
	var v T
	switch {
	case ctx == nil:
		return v, errNilContext
	case cfg.err != nil:
		return v, cfg.err
	case fn == nil:
		return v, errNilFunc
	}
	c := call{cfg: cfg, key: key}
	err := c.run(ctx, nil, func(ctx context.Context) (bool, error) {
		if cfg.attemptTimeout <= 0 {
			var err error
			v, err = fn(ctx) // a panic goes on to the caller
			return false, err
		}
		return timed(ctx, cfg, cfg.attemptTimeout, func(ctx context.Context) error {
			var err error
			v, err = fn(ctx)
			return err
		})
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

func run(ctx context.Context, cfg *config, key string, fn func(context.Context) error) error {
	switch {
	case ctx == nil:
		return errNilContext
	case cfg.err != nil:
		return cfg.err
	case fn == nil:
		return errNilFunc
	}
	c := call{cfg: cfg, key: key}
	return c.run(ctx, nil, func(ctx context.Context) (bool, error) {
		if cfg.attemptTimeout <= 0 {
			return false, fn(ctx)
		}
		return timed(ctx, cfg, cfg.attemptTimeout, fn)
	})
}

func attempts(ctx context.Context, cfg *config, errp *error) iter.Seq[int] {
	return func(yield func(int) bool) {
		switch {
		case errp == nil:
			return
		case ctx == nil:
			*errp = errNilContext
			return
		case cfg.err != nil:
			*errp = cfg.err
			return
		}
		c := call{cfg: cfg, key: cfg.key}
		err := c.run(ctx, nil, func(actx context.Context) (bool, error) {
			*errp = nil
			c.halt = !yield(AttemptFrom(actx)) // the body broke out: no retry
			return false, *errp
		})
		if !c.halt && err != nil {
			*errp = err
		}
	}
}
