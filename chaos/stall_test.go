package chaos_test

import (
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// stallProbe records when the process left a goroutine that was ready to
// run waiting: a starved machine (other processes, the race detector, the
// suite's own load on two cores) delays every goroutine of the process
// alike, whatever it waits for. Two goroutines sample it, one wake-up
// path each:
//   - a 1 ms timer: the goroutine was due when its timer fired and ran when
//     it woke; the runtime hands it the next turn of its processor, so it
//     sees the process's share of the CPU;
//   - a read on a loopback TCP connection, to which the timer's goroutine
//     writes the time as it runs: the reader was due when the bytes were
//     sent and ran when it read them. The network poller puts it at the
//     back of a run queue, as it does the transport's own connections, so
//     it also sees how long the ready goroutines queue.
//
// A stall is such a wait, from when the goroutine was due to when it ran.
type stallProbe struct {
	mu      sync.Mutex
	byTimer []stall // in order: each starts after the last ended
	byRead  []stall // likewise
	done    chan struct{}
	w, r    net.Conn
	wg      sync.WaitGroup
}

// stall is a time when a goroutine of the probe was ready but not running.
type stall struct{ from, to time.Time }

// startStallProbe starts the probe; stop it with stop.
func startStallProbe(t *testing.T) *stallProbe {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Accept()
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	p := &stallProbe{done: make(chan struct{}), w: w, r: r}
	p.wg.Add(2)
	go p.tick()
	go p.read()
	return p
}

// tick sleeps 1 ms at a time and writes, each time it wakes, the time it
// woke to the connection.
func (p *stallProbe) tick() {
	defer p.wg.Done()
	const tick = time.Millisecond
	t := time.NewTimer(tick)
	defer t.Stop()
	var b [8]byte
	for {
		asleep := time.Now()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		woke := time.Now()
		p.add(&p.byTimer, asleep.Add(tick), woke)
		binary.LittleEndian.PutUint64(b[:], uint64(woke.UnixNano()))
		if _, err := p.w.Write(b[:]); err != nil {
			return
		}
		t.Reset(tick)
	}
}

// read reads the times tick wrote, as they arrive.
func (p *stallProbe) read() {
	defer p.wg.Done()
	var b [8]byte
	for {
		if _, err := io.ReadFull(p.r, b[:]); err != nil {
			return
		}
		p.add(&p.byRead, time.Unix(0, int64(binary.LittleEndian.Uint64(b[:]))), time.Now())
	}
}

func (p *stallProbe) add(to *[]stall, due, ran time.Time) {
	if !ran.After(due) {
		return
	}
	p.mu.Lock()
	*to = append(*to, stall{due, ran})
	p.mu.Unlock()
}

func (p *stallProbe) stop() {
	close(p.done)
	p.w.Close()
	p.r.Close()
	p.wg.Wait()
}

// longest returns the longest stall overlapping [from, to].
func (p *stallProbe) longest(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var m time.Duration
	for _, ss := range [][]stall{p.byTimer, p.byRead} {
		i, _ := slices.BinarySearchFunc(ss, from, func(s stall, t time.Time) int { return s.to.Compare(t) })
		for ; i < len(ss) && ss[i].from.Before(to); i++ {
			m = max(m, ss[i].to.Sub(ss[i].from))
		}
	}
	return m
}
