package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
)

var (
	_ gobreaker.SharedDataStore = (*Store)(nil)
	_ retry.ContextStore        = (*Store)(nil)
)

// Store keeps the state of circuit breakers in Redis: set it as
// retry.Breaker.Store and every process using the same Redis and prefix
// shares one breaker (one per key with Breaker.PerKey). It implements
// gobreaker's SharedDataStore and retry.ContextStore: a lock with an expiry
// (Options.LockTTL) released only by its holder (a compare-and-delete
// script), and the state under a TTL.
//
// Each operation is bounded by Options.Timeout and by its context; the
// Retrier passes the caller's, so that a slow Redis holds a call at most
// one Timeout past its deadline (to release the lock). A lock request that
// fails may still reach Redis and take the lock when Redis resumes: the
// store then sends the same compare-and-delete at once, and, for twice
// LockTTL, its own next lock requests replace a lock left with such a
// token, so that a stall leaves no lock behind for the fleet to wait out.
//
// When Redis fails or is slower than Options.Timeout, the store's methods
// return the error, counted in Stats; the Retrier then guards the attempt
// with its own, per-process breaker (retry.Stats.BreakerFallbacks) and goes
// back to the shared one as soon as Redis answers.
//
// A Store is safe for concurrent use. Build it with NewStore.
type Store struct {
	client  goredis.UniversalClient
	opts    Options
	mu      sync.Mutex
	tokens  map[string]string   // lock name → the token of the lock held
	orphans map[string][]orphan // lock name → tokens of failed lock requests
	errs    atomic.Int64
	busy    atomic.Int64
}

// orphan is the token of a lock request that failed, and until when the
// lock it may have taken could be left.
type orphan struct {
	token string
	until time.Time
}

// maxOrphans bounds the tokens kept per lock: only the first request to
// reach Redis can have taken the lock, and the oldest go first.
const maxOrphans = 16

// NewStore returns a Store on client.
func NewStore(client goredis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redis: NewStore: client is nil")
	}
	opts, err := opts.withDefaults("NewStore")
	if err != nil {
		return nil, err
	}
	return &Store{client: client, opts: opts, tokens: make(map[string]string), orphans: make(map[string][]orphan)}, nil
}

// StoreStats counts a Store's outcomes.
type StoreStats struct {
	Errors int64 // operations that failed: Redis down, slow or refusing
	Busy   int64 // Lock calls that found the lock held
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	return StoreStats{Errors: s.errs.Load(), Busy: s.busy.Load()}
}

func (s *Store) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.opts.Timeout)
}

func (s *Store) fail(op, key string, err error) error {
	s.errs.Add(1)
	return fmt.Errorf("redis: %s %s: %w", op, key, err)
}

// lock takes the lock KEYS[1] with the token ARGV[1] for ARGV[2]
// milliseconds, when it is free or held with one of the tokens ARGV[3:],
// those of this store's failed requests; it returns 1 when taken.
var lock = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
	local mine = false
	for i = 3, #ARGV do
		if cur == ARGV[i] then mine = true break end
	end
	if not mine then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// Lock is LockContext without a context of its own.
func (s *Store) Lock(name string) error { return s.LockContext(context.Background(), name) }

// LockContext takes the lock name for Options.LockTTL, or returns
// retry.ErrStoreLocked when another holder has it.
func (s *Store) LockContext(ctx context.Context, name string) error {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	key := s.opts.Prefix + name
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redis: lock %s: %w", key, err) // nothing sent
	}
	args := []any{token, max(s.opts.LockTTL.Milliseconds(), 1)}
	now := time.Now()
	s.mu.Lock()
	live := s.orphans[name][:0]
	for _, o := range s.orphans[name] {
		if now.Before(o.until) {
			live = append(live, o)
			args = append(args, o.token)
		}
	}
	s.orphans[name] = live
	if len(live) == 0 {
		delete(s.orphans, name)
	}
	s.mu.Unlock()

	octx, cancel := s.ctx(ctx)
	n, err := lock.Run(octx, s.client, []string{key}, args...).Int()
	cancel()
	if err != nil {
		if mayHaveRun(err) {
			s.mu.Lock()
			o := append(s.orphans[name], orphan{token: token, until: now.Add(2 * s.opts.LockTTL)})
			s.orphans[name] = o[max(len(o)-maxOrphans, 0):]
			s.mu.Unlock()
			// Redis may run the request all the same: undo it, after it.
			rctx, cancel := s.ctx(context.WithoutCancel(ctx))
			if n, _ := unlock.Run(rctx, s.client, []string{key}, token).Int(); n == 1 {
				s.forget(name, token)
			}
			cancel()
		}
		return s.fail("lock", key, err)
	}
	if n == 0 {
		s.busy.Add(1)
		return retry.ErrStoreLocked
	}
	s.mu.Lock()
	s.tokens[name] = token
	s.mu.Unlock()
	return nil
}

// mayHaveRun reports whether a request that failed with err may have
// reached Redis all the same: not when no connection was had, nor when
// Redis answered with an error.
func mayHaveRun(err error) bool {
	var op *net.OpError
	var reply goredis.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, goredis.ErrPoolTimeout), errors.Is(err, goredis.ErrClosed),
		errors.As(err, &reply):
		return false
	}
	return true
}

// forget drops token from the orphans of the lock name.
func (s *Store) forget(name, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orphans[name]
	for i := range o {
		if o[i].token == token {
			s.orphans[name] = append(o[:i:i], o[i+1:]...)
			break
		}
	}
	if len(s.orphans[name]) == 0 {
		delete(s.orphans, name)
	}
}

// unlock deletes a lock only if it still holds the caller's token: a lock
// that expired and was taken by another is left alone. It returns 1 when
// it deleted the lock.
var unlock = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// Unlock is UnlockContext without a context of its own.
func (s *Store) Unlock(name string) error { return s.UnlockContext(context.Background(), name) }

// UnlockContext releases the lock name if this store holds it.
func (s *Store) UnlockContext(ctx context.Context, name string) error {
	s.mu.Lock()
	token, ok := s.tokens[name]
	delete(s.tokens, name)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	key := s.opts.Prefix + name
	octx, cancel := s.ctx(ctx)
	defer cancel()
	if err := unlock.Run(octx, s.client, []string{key}, token).Err(); err != nil {
		return s.fail("unlock", key, err)
	}
	return nil
}

// GetData is GetDataContext without a context of its own.
func (s *Store) GetData(name string) ([]byte, error) {
	return s.GetDataContext(context.Background(), name)
}

// GetDataContext returns the data stored under name, nil if none.
func (s *Store) GetDataContext(ctx context.Context, name string) ([]byte, error) {
	key := s.opts.Prefix + name
	octx, cancel := s.ctx(ctx)
	defer cancel()
	b, err := s.client.Get(octx, key).Bytes()
	switch {
	case err == goredis.Nil:
		return nil, nil
	case err != nil:
		return nil, s.fail("GET", key, err)
	}
	return b, nil
}

// SetData is SetDataContext without a context of its own.
func (s *Store) SetData(name string, data []byte) error {
	return s.SetDataContext(context.Background(), name, data)
}

// SetDataContext stores data under name for Options.StateTTL.
func (s *Store) SetDataContext(ctx context.Context, name string, data []byte) error {
	key := s.opts.Prefix + name
	octx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.client.Set(octx, key, data, s.opts.StateTTL).Err(); err != nil {
		return s.fail("SET", key, err)
	}
	return nil
}
