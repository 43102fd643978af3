package retry

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// maxKeys bounds the per-key breakers, rate limiters and budgets of a
// Retrier.
const maxKeys = 1024

// keyed is a bounded map from keys to per-key values: when it is full, the
// key used least recently is dropped to make room for a new one. It is safe
// for concurrent use.
//
// A use of a kept key takes no lock and, while no key is added, writes
// nothing: time is counted in additions, and a key's entry carries the count
// at its last use, written only when it changed. The key with the lowest
// stamp is dropped: the one used least recently, where keys last used
// between the same two additions count as used together. So keys in steady
// use write to no memory shared by every call, and a key used since an
// addition outlives every key not used since.
type keyed[V any] struct {
	m    sync.Map      // string -> *keyedEntry[V]
	tick atomic.Uint64 // even: twice the additions; an added key is stamped tick-1, a use tick

	mu    sync.Mutex // serializes additions and drops
	n     int        // keys kept, under mu
	max   int
	least []stamped[V] // under mu: the lowest stamps seen at the last scan, lowest first
}

type keyedEntry[V any] struct {
	key  string
	v    V
	used atomic.Uint64 // the map's tick at the last use, or tick-1 at its addition
}

type stamped[V any] struct {
	e    *keyedEntry[V]
	used uint64
}

// newKeyed returns an empty map that keeps at most max keys, max >= 1.
func newKeyed[V any](max int) *keyed[V] {
	return &keyed[V]{max: max}
}

// touch marks e used now.
func (k *keyed[V]) touch(e *keyedEntry[V]) { k.stamp(e, k.tick.Load()) }

// stamp raises e's stamp to t. A use that read the tick before an addition
// may write after a later use stamped e since; a stamp never goes back, so
// that such a race cannot make a key in use look older than the keys not
// used since, nor give a key remembered by a scan its old stamp back.
func (k *keyed[V]) stamp(e *keyedEntry[V], t uint64) {
	for {
		u := e.used.Load()
		if u >= t || e.used.CompareAndSwap(u, t) {
			return
		}
	}
}

// get returns the value of key, made by mk on first use (under the map's
// lock: mk must not use the map), and marks it used. The order of use
// decides which key is dropped, so the clock reading is not needed; it is
// taken for the callers' convenience.
func (k *keyed[V]) get(key string, _ time.Time, mk func() V) V {
	if e, ok := k.m.Load(key); ok {
		e := e.(*keyedEntry[V])
		k.touch(e)
		return e.v
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m.Load(key); ok { // added while this call waited
		e := e.(*keyedEntry[V])
		k.touch(e)
		return e.v
	}
	if k.n >= k.max {
		k.dropLeast()
	}
	e := &keyedEntry[V]{key: key, v: mk()}
	e.used.Store(k.tick.Add(2) - 1) // after the uses before it, before those after
	k.m.Store(key, e)
	k.n++
	return e.v
}

// dropLeast drops the key used least recently, under mu. The keys
// remembered by the last scan are the lowest stamps of the map at that
// time; one stamped again since is passed over, and every key added or
// stamped since is stamped at or above all of them, so the first
// remembered key still bearing its stamp is the map's lowest.
func (k *keyed[V]) dropLeast() {
	for {
		for len(k.least) > 0 {
			s := k.least[0]
			k.least = k.least[1:]
			if s.e.used.Load() == s.used {
				k.m.Delete(s.e.key)
				k.n--
				return
			}
		}
		k.scan()
	}
}

// scan remembers the quarter of the keys used least recently, under mu, so
// that a stream of new keys into a full map pays for a scan and a sort of
// the map once every max/4 keys, not once a key.
func (k *keyed[V]) scan() {
	all := make([]stamped[V], 0, k.n)
	k.m.Range(func(_, v any) bool {
		e := v.(*keyedEntry[V])
		all = append(all, stamped[V]{e: e, used: e.used.Load()})
		return true
	})
	slices.SortFunc(all, func(a, b stamped[V]) int { return cmp.Compare(a.used, b.used) })
	n := min(len(all), max(1, k.max/4))
	k.least = all[:n:n]
}

// find returns the value of key and marks it used, or reports false when
// the key is not kept.
func (k *keyed[V]) find(key string) (v V, ok bool) {
	e, ok := k.m.Load(key)
	if !ok {
		return v, false
	}
	k.touch(e.(*keyedEntry[V]))
	return e.(*keyedEntry[V]).v, true
}

// each calls f for every key kept, most recently used first, on a
// snapshot. The snapshot is taken under mu: a Range during additions and
// drops is no snapshot, and can visit a key dropped and the key added in
// its place, more keys than the map keeps.
func (k *keyed[V]) each(f func(key string, v V)) {
	k.mu.Lock()
	all := make([]stamped[V], 0, k.n)
	k.m.Range(func(_, v any) bool {
		e := v.(*keyedEntry[V])
		all = append(all, stamped[V]{e: e, used: e.used.Load()})
		return true
	})
	k.mu.Unlock()
	slices.SortFunc(all, func(a, b stamped[V]) int { return cmp.Compare(b.used, a.used) })
	for _, s := range all {
		f(s.e.key, s.e.v)
	}
}

// len returns the number of keys kept.
func (k *keyed[V]) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}
