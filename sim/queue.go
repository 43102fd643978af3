package sim

// window is a fault's span, [from, to) in nanoseconds since the start,
// with what it does.
type window struct {
	from, to int64
	fail     float64
	hang     bool
	slow     float64
	active   int // workers left; 0 for all
}

func (w *window) covers(t int64) bool { return t >= w.from && t < w.to }

// workers is the service's workers and their FIFO queue. Because service
// times are drawn as attempts are admitted and the faults are known in
// advance, an attempt's start and end are known the moment it arrives: it
// waits for the first worker free, in order of arrival, and a worker put
// aside by a capacity drop starts nothing while the drop lasts.
type workers struct {
	free    []int64 // when each worker is next free
	waiting []int64 // the starts of admitted attempts not yet started, in order
	length  int     // Service.QueueLength
	wait    int64   // Service.QueueWait; 0 for no bound
	faults  []window
}

// The reasons a service refuses an attempt.
const (
	refusedFull = "queue full" // the queue holds QueueLength, or there is none
	refusedWait = "queue wait" // the wait would pass QueueWait
)

// admit takes the attempt arriving at t: it returns the worker that will
// serve it and when it starts, or why it is refused. The caller draws its
// service time and gives the worker's next free time to serve.
func (w *workers) admit(t int64) (worker int, start int64, refused string) {
	// Starts come in arrival order (FIFO), so those not after t lead.
	i := 0
	for i < len(w.waiting) && w.waiting[i] <= t {
		i++
	}
	w.waiting = w.waiting[i:]
	if w.length > 0 && len(w.waiting) >= w.length {
		return 0, 0, refusedFull
	}
	worker, start = w.first(t)
	switch {
	case w.length < 0 && start > t:
		return 0, 0, refusedFull
	case w.wait > 0 && start-t > w.wait:
		return 0, 0, refusedWait
	}
	return worker, start, ""
}

// serve books worker from start to end.
func (w *workers) serve(worker int, t, start, end int64) {
	w.free[worker] = end
	if start > t {
		w.waiting = append(w.waiting, start)
	}
}

// cost books a refusal's cost c at t on the first worker free, after the
// work queued; it is no attempt, so it takes no place in the queue.
func (w *workers) cost(t, c int64) {
	worker, start := w.first(t)
	w.free[worker] = start + c
}

// first returns the worker that can start first from t, and when: each
// worker's next free time, pushed past the capacity drops that put it
// aside then; ties go to the lower worker.
func (w *workers) first(t int64) (worker int, start int64) {
	worker = -1
	for j, f := range w.free {
		at := max(t, f)
		for moved := true; moved; {
			moved = false
			for k := range w.faults {
				if f := &w.faults[k]; f.active > 0 && j >= f.active && f.covers(at) {
					at, moved = f.to, true
				}
			}
		}
		if worker < 0 || at < start {
			worker, start = j, at
		}
	}
	return worker, start
}
