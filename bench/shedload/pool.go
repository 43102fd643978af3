package shedload

import (
	"context"
	"time"
)

// Pool is a server's fixed capacity: Workers workers, each request holding
// one for the service time. Requests beyond wait for a worker in an
// unbounded queue, as they do in a plain Go server, and leave it when their
// context ends; a request being served runs to its end. It is safe for
// concurrent use; the zero Pool is not usable (use NewPool).
type Pool struct {
	workers chan struct{}
	service time.Duration
}

// NewPool returns a pool of workers workers serving a request in service.
func NewPool(workers int, service time.Duration) *Pool {
	return &Pool{workers: make(chan struct{}, workers), service: service}
}

// Serve waits for a worker and holds it for the service time, and reports
// whether it did; it returns false, without serving, when ctx ends first.
func (p *Pool) Serve(ctx context.Context) bool {
	select {
	case p.workers <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	time.Sleep(p.service)
	<-p.workers
	return true
}
