package sim

import (
	"errors"
	"time"

	"github.com/steadyhq/retry"
)

// What a run counts as it goes, for the fleet and for the client.

// tallies calls f with the fleet's tally and, with more than one client,
// client c's.
func (r *run) tallies(c int, f func(t *tally)) {
	f(&r.total)
	if r.each != nil {
		f(&r.each[c])
	}
}

// arrived counts a call of client c arriving at t.
func (r *run) arrived(c int, t int64) {
	in := r.svc.inFault(t)
	r.tallies(c, func(tl *tally) {
		tl.f.Requests++
		tl.bucket(t).Arrivals++
		if in {
			tl.f.FaultRequests++
		}
	})
}

// ended counts a call of client c that arrived at t0 and ended now with
// err.
func (r *run) ended(c int, t0 int64, err error) {
	t := r.clk.now
	r.lat = append(r.lat, time.Duration(t-t0))
	if err != nil {
		why := retry.TypeOf(err)
		if re := (*retry.Error)(nil); errors.As(err, &re) {
			why = re.Reason.String()
		}
		r.tallies(c, func(tl *tally) {
			tl.f.Failed[why]++
			tl.bucket(t).Failed++
		})
		return
	}
	phase := 2
	switch {
	case t < r.fs:
		phase = 0
	case t < r.fe:
		phase = 1
	}
	inRun := t <= int64(r.s.Duration)
	r.tallies(c, func(tl *tally) {
		tl.f.Succeeded++
		tl.bucket(t).Succeeded++
		if inRun {
			tl.good[phase]++
		}
	})
}

// unfinished counts a call of client c still running when the run ended.
func (r *run) unfinished(c int) {
	r.tallies(c, func(tl *tally) { tl.f.Unfinished++ })
}

// hit counts an attempt of client c reaching the service at t.
func (r *run) hit(c int, t int64, inFault bool) {
	r.tallies(c, func(tl *tally) {
		tl.f.Attempts++
		tl.bucket(t).Attempts++
		if inFault {
			tl.f.FaultAttempts++
		}
	})
}

// errored counts an attempt of client c that the service failed at t.
func (r *run) errored(c int, t int64) {
	r.tallies(c, func(tl *tally) {
		tl.f.Errors++
		tl.bucket(t).Errors++
	})
}

// refused counts an attempt of client c that the service refused at t.
func (r *run) refused(c int, t int64, why string) {
	r.errored(c, t)
	r.tallies(c, func(tl *tally) { tl.f.Refused[why]++ })
}

// worked counts work done for client c.
func (r *run) worked(c int, d time.Duration) {
	r.tallies(c, func(tl *tally) { tl.f.Work += d })
}

// wasted counts work done for client c after it stopped waiting.
func (r *run) wasted(c int, d time.Duration) {
	r.tallies(c, func(tl *tally) { tl.f.Wasted += d })
}

// report assembles the Report of a run that ended at end.
func (r *run) report(end time.Duration) *Report {
	s := r.s
	fs, fe := time.Duration(r.fs), time.Duration(r.fe)
	rep := &Report{End: end, Latencies: r.lat, Resolution: s.resolution(), FaultsStart: fs, FaultsEnd: fe}
	r.total.finish(s, fs, fe)
	rep.Total = *r.total.f
	if r.each == nil {
		rep.Clients = []Figures{rep.Total}
	}
	for i := range r.each {
		r.each[i].finish(s, fs, fe)
		rep.Clients = append(rep.Clients, *r.each[i].f)
	}
	for _, m := range r.clients {
		rep.Stats = append(rep.Stats, m.r.Stats())
	}
	for _, l := range r.layers {
		l.fig.Stats = l.r.Stats()
		rep.Layers = append(rep.Layers, l.fig)
	}
	rep.sortLatencies()
	return rep
}
