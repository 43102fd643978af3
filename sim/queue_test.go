package sim

import (
	"testing"
	"time"
)

// TestWorkers: attempts wait FIFO for the first worker free; a full queue
// refuses at once, as does no queue when every worker is busy, and a wait
// past QueueWait; a capacity drop puts workers aside until it ends; a
// refusal's cost is booked after the work queued, on no place in the
// queue.
func TestWorkers(t *testing.T) {
	ms := func(v int) int64 { return int64(time.Duration(v) * time.Millisecond) }
	type arrival struct {
		at, start int64
		refused   string
		cost      int64 // a refusal at at that costs this, instead of an attempt
	}
	cases := []struct {
		name     string
		workers  int
		length   int
		wait     int64
		faults   []window
		arrivals []arrival
	}{
		{name: "two workers, a queue of two", workers: 2, length: 2, arrivals: []arrival{
			{at: 0, start: 0},
			{at: 0, start: 0},
			{at: 0, start: ms(100)},
			{at: 0, start: ms(100)},
			{at: 0, refused: refusedFull},
			{at: ms(50), refused: refusedFull},
			{at: ms(150), start: ms(200)}, // the two waiting have started
		}},
		{name: "no queue", workers: 1, length: -1, arrivals: []arrival{
			{at: 0, start: 0},
			{at: ms(50), refused: refusedFull},
			{at: ms(100), start: ms(100)},
		}},
		{name: "a bound on the wait", workers: 1, wait: ms(150), arrivals: []arrival{
			{at: 0, start: 0},
			{at: 0, start: ms(100)},
			{at: 0, refused: refusedWait}, // it would start at 200ms
			{at: ms(60), start: ms(200)},
		}},
		{name: "a capacity drop puts a worker aside until it ends", workers: 2, length: 10,
			faults: []window{{from: ms(50), to: ms(500), active: 1}}, arrivals: []arrival{
				{at: 0, start: 0},
				{at: ms(60), start: ms(100)},
				{at: ms(70), start: ms(200)},
				{at: ms(450), start: ms(450)},
				{at: ms(460), start: ms(500)}, // the worker back at the drop's end
			}},
		{name: "a refusal's cost comes after the work queued", workers: 1, length: 1, arrivals: []arrival{
			{at: 0, start: 0},
			{at: 0, start: ms(100)},
			{at: ms(10), cost: ms(30)},    // books [200ms, 230ms)
			{at: ms(110), start: ms(230)}, // the queue had room again
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &workers{free: make([]int64, c.workers), length: c.length, wait: c.wait, faults: c.faults}
			for i, a := range c.arrivals {
				if a.cost > 0 {
					w.cost(a.at, a.cost)
					continue
				}
				worker, start, why := w.admit(a.at)
				if why != a.refused || why == "" && start != a.start {
					t.Errorf("arrival %d at %v: start %v, refused %q; want %v, refused %q",
						i, time.Duration(a.at), time.Duration(start), why, time.Duration(a.start), a.refused)
				}
				if why == "" {
					w.serve(worker, a.at, start, start+ms(100))
				}
			}
		})
	}
}
