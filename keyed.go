package retry

import (
	"container/list"
	"sync"
	"time"
)

// maxKeys bounds the per-key breakers, rate limiters and budgets of a
// Retrier.
const maxKeys = 1024

// keyed is a bounded map from keys to per-key values: when it is full, the
// key used least recently is dropped to make room for a new one. It is safe
// for concurrent use.
type keyed[V any] struct {
	mu    sync.Mutex
	m     map[string]*list.Element // of keyedEntry[V]
	order list.List                // most recently used first
	max   int
}

type keyedEntry[V any] struct {
	key string
	v   V
}

// newKeyed returns an empty map that keeps at most max keys, max >= 1.
func newKeyed[V any](max int) *keyed[V] {
	return &keyed[V]{m: make(map[string]*list.Element), max: max}
}

// get returns the value of key, made by mk on first use (under the map's
// lock: mk must not use the map), and marks it used. The order of use
// decides which key is dropped, so the clock reading is not needed; it is
// taken for the callers' convenience.
func (k *keyed[V]) get(key string, _ time.Time, mk func() V) V {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m[key]; ok {
		k.order.MoveToFront(e)
		return e.Value.(*keyedEntry[V]).v
	}
	if len(k.m) >= k.max {
		oldest := k.order.Back()
		delete(k.m, oldest.Value.(*keyedEntry[V]).key)
		k.order.Remove(oldest)
	}
	v := mk()
	k.m[key] = k.order.PushFront(&keyedEntry[V]{key: key, v: v})
	return v
}

// find returns the value of key and marks it used, or reports false when
// the key is not kept.
func (k *keyed[V]) find(key string) (v V, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[key]
	if !ok {
		return v, false
	}
	k.order.MoveToFront(e)
	return e.Value.(*keyedEntry[V]).v, true
}

// each calls f for every key kept, outside the lock, on a snapshot.
func (k *keyed[V]) each(f func(key string, v V)) {
	k.mu.Lock()
	entries := make([]*keyedEntry[V], 0, len(k.m))
	for e := k.order.Front(); e != nil; e = e.Next() {
		entries = append(entries, e.Value.(*keyedEntry[V]))
	}
	k.mu.Unlock()
	for _, e := range entries {
		f(e.key, e.v)
	}
}

// len returns the number of keys kept.
func (k *keyed[V]) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
