package redis

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/steadyhq/retry"
	"golang.org/x/time/rate"
)

// maxFallbackKeys bounds the local buckets of a per-key Limiter; past it the
// buckets are dropped and begin again full.
const maxFallbackKeys = 1024

// localLimiter is the in-process token bucket a Limiter falls back on while
// Redis fails: one golang.org/x/time/rate bucket, or one per key.
type localLimiter struct {
	limit  rate.Limit
	burst  int
	perKey bool

	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

// newLocalLimiter checks limit and burst as NewLimiter documents them.
func newLocalLimiter(limit float64, burst int, perKey bool) (*localLimiter, error) {
	switch {
	case !(limit > 0) || limit > 1e9:
		return nil, fmt.Errorf("limit = %v: must be a number of attempts per second in (0, 1e9]", limit)
	case burst < 1:
		return nil, fmt.Errorf("burst = %d: must be >= 1", burst)
	case float64(burst)/limit > 1e9:
		return nil, fmt.Errorf("burst = %d: burst / limit, the time to refill a whole burst, must be at most 1e9 seconds", burst)
	}
	return &localLimiter{limit: rate.Limit(limit), burst: burst, perKey: perKey, keys: map[string]*rate.Limiter{}}, nil
}

func (l *localLimiter) bucket(key string) *rate.Limiter {
	if !l.perKey {
		key = ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= maxFallbackKeys {
			clear(l.keys)
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.keys[key] = b
	}
	return b
}

// setShare paces the local bucket of key at share of the limit and of the
// burst (at least one token).
func (l *localLimiter) setShare(key string, share float64) {
	b := l.bucket(key)
	now := time.Now()
	b.SetLimitAt(now, l.limit*rate.Limit(share))
	b.SetBurstAt(now, max(int(math.Round(float64(l.burst)*share)), 1))
}

// Reserve implements retry.Limiter on the local bucket of key.
func (l *localLimiter) Reserve(_ context.Context, key string, now time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	b := l.bucket(key)
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return 0, nil, false
	}
	wait := r.DelayFrom(now)
	if wait > maxWait {
		r.CancelAt(now)
		return 0, nil, false
	}
	return wait, r.CancelAt, true
}

// localBudget is the bucket of one key that a Budget falls back on while
// Redis fails: retry.Budget's rule in this process, holding Tokens (what
// the window's successes earn is the fleet's, in Redis). It reads the
// tally's counts of successes and tokens given back as a retry asks.
type localBudget struct {
	spec retry.Budget // with its defaults, none as 0

	mu                sync.Mutex
	tokens            float64
	seenWon, seenBack int64
}

// take brings the bucket up to won successes and back tokens given back,
// and takes a token for a retry, slow after a timeout, when the rule
// allows it.
func (l *localBudget) take(won, back int64, slow bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens = min(l.tokens+l.spec.Ratio*float64(won-l.seenWon)+float64(back-l.seenBack), l.spec.Tokens)
	l.seenWon, l.seenBack = won, back
	floor := 0.0
	if slow {
		floor = max(l.spec.Tokens-l.spec.TimeoutTokens, 0)
	}
	if l.tokens-1 < floor {
		return false
	}
	l.tokens--
	return true
}
