package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
)

var _ gobreaker.SharedDataStore = (*Store)(nil)

// Store keeps the state of circuit breakers in Redis: set it as
// retry.Breaker.Store and every process using the same Redis and prefix
// shares one breaker (one per key with Breaker.PerKey). It implements
// gobreaker's SharedDataStore: a lock with an expiry (SET NX PX) released
// only by its holder (a compare-and-delete script), and the state under a
// TTL.
//
// When Redis fails or is slower than Options.Timeout, the store's methods
// return the error, counted in Stats; the Retrier then guards the attempt
// with its own, per-process breaker (retry.Stats.BreakerFallbacks) and goes
// back to the shared one as soon as Redis answers.
//
// A Store is safe for concurrent use. Build it with NewStore.
type Store struct {
	client goredis.UniversalClient
	opts   Options
	mu     sync.Mutex
	tokens map[string]string // lock name → the token of the lock held
	errs   atomic.Int64
	busy   atomic.Int64
}

// NewStore returns a Store on client.
func NewStore(client goredis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redis: NewStore: client is nil")
	}
	opts, err := opts.withDefaults("NewStore")
	if err != nil {
		return nil, err
	}
	return &Store{client: client, opts: opts, tokens: make(map[string]string)}, nil
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

func (s *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.Timeout)
}

func (s *Store) fail(op, key string, err error) error {
	s.errs.Add(1)
	return fmt.Errorf("redis: %s %s: %w", op, key, err)
}

// Lock takes the lock name for Options.LockTTL, or returns
// retry.ErrStoreLocked when another holder has it.
func (s *Store) Lock(name string) error {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	key := s.opts.Prefix + name
	ctx, cancel := s.ctx()
	defer cancel()
	ok, err := s.client.SetNX(ctx, key, token, s.opts.LockTTL).Result()
	if err != nil {
		return s.fail("SET NX", key, err)
	}
	if !ok {
		s.busy.Add(1)
		return retry.ErrStoreLocked
	}
	s.mu.Lock()
	s.tokens[name] = token
	s.mu.Unlock()
	return nil
}

// unlock deletes a lock only if it still holds the caller's token: a lock
// that expired and was taken by another is left alone.
var unlock = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// Unlock releases the lock name if this store holds it.
func (s *Store) Unlock(name string) error {
	s.mu.Lock()
	token, ok := s.tokens[name]
	delete(s.tokens, name)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	key := s.opts.Prefix + name
	ctx, cancel := s.ctx()
	defer cancel()
	if err := unlock.Run(ctx, s.client, []string{key}, token).Err(); err != nil {
		return s.fail("unlock", key, err)
	}
	return nil
}

// GetData returns the data stored under name, nil if none.
func (s *Store) GetData(name string) ([]byte, error) {
	key := s.opts.Prefix + name
	ctx, cancel := s.ctx()
	defer cancel()
	b, err := s.client.Get(ctx, key).Bytes()
	switch {
	case err == goredis.Nil:
		return nil, nil
	case err != nil:
		return nil, s.fail("GET", key, err)
	}
	return b, nil
}

// SetData stores data under name for Options.StateTTL.
func (s *Store) SetData(name string, data []byte) error {
	key := s.opts.Prefix + name
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.client.Set(ctx, key, data, s.opts.StateTTL).Err(); err != nil {
		return s.fail("SET", key, err)
	}
	return nil
}
