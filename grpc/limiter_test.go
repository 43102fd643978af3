package grpc_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// quota is a Limiter that grants n attempts in all and records the key of
// every reservation.
type quota struct {
	mu   sync.Mutex
	n    int
	keys []string
}

func (q *quota) Reserve(_ context.Context, key string, _ time.Time, _ time.Duration) (time.Duration, func(time.Time), bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys = append(q.keys, key)
	if q.n == 0 {
		return 0, nil, false
	}
	q.n--
	return 0, nil, true
}

// The Retrier's rate limiter paces every attempt, first ones and retries,
// under the connection's target as key; a call it refuses before any attempt
// fails with codes.Unavailable and type ratelimit.local without reaching the
// server, and one it refuses between attempts keeps the last status in its
// chain (status.Code), the engine typing the stop itself.
func TestLimiter(t *testing.T) {
	tests := []struct {
		name   string
		grant  int
		hits   int
		code   codes.Code
		typ    string
		reason string
	}{
		{name: "two attempts granted", grant: 2, hits: 2, code: codes.Unavailable, typ: "ratelimit.local", reason: "rate_limited"},
		{name: "none granted", grant: 0, hits: 0, code: codes.Unavailable, typ: "ratelimit.local", reason: "rate_limited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &quota{n: tt.grant}
			s := &server{check: failing(codes.Unavailable, 9)}
			c, cc := start(t, s, retry.New(retry.WithPolicy(fast), retry.WithRateLimit(retry.RateLimit{Shared: q})))
			_, err := c.Check(context.Background(), check)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("status.Code = %v, want %v (err %v)", got, tt.code, err)
			}
			if got := retry.TypeOf(err); got != tt.typ {
				t.Errorf("TypeOf = %q, want %q", got, tt.typ)
			}
			if got := reasonOf(err); got != tt.reason {
				t.Errorf("reason = %q, want %q", got, tt.reason)
			}
			if got := s.count(); got != tt.hits {
				t.Errorf("%d hits, want %d", got, tt.hits)
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			want := slices.Repeat([]string{cc.Target()}, tt.grant+1)
			if !slices.Equal(q.keys, want) {
				t.Errorf("reservations under keys %q, want %q", q.keys, want)
			}
		})
	}
}
