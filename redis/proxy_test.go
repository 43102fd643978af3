package redis_test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy on a loopback port in front of a redis-server, for
// the faults of the network between a process and Redis: it passes bytes
// both ways, holds each reply for a delay, or partitions (holds everything,
// as a network that lost its route does), and when the partition heals it
// resets the connections that were cut, as the kernel would on both ends.
type proxy struct {
	t     testing.TB
	ln    net.Listener
	to    string
	delay atomic.Int64 // ns each chunk of replies is held
	cut   atomic.Bool  // partitioned: nothing passes

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startProxy starts a proxy to the address to, stopped when the test ends.
func startProxy(t testing.TB, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, to: to, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.resetAll()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's address, for clients.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Delay holds every reply for d from now on; 0 passes them at once.
func (p *proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Partition stops every byte both ways, on open connections and new ones.
func (p *proxy) Partition() { p.cut.Store(true) }

// Heal ends a partition: the connections open through it are reset, and
// new ones pass again.
func (p *proxy) Heal() {
	p.resetAll()
	p.cut.Store(false)
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) resetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, not an orderly close
		}
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) handle(c net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.to, time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c) || !p.track(up) {
		c.Close()
		up.Close()
		return
	}
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); p.pipe(up, c, false) }()
	go func() { defer both.Done(); p.pipe(c, up, true) }()
	both.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// pipe copies from src to dst until either ends; replies (from Redis) are
// held for the delay. Bytes read while partitioned are dropped: their
// connection is reset when the partition heals.
func (p *proxy) pipe(dst, src net.Conn, replies bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if d := time.Duration(p.delay.Load()); replies && d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
