package chaos

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Headers of the request protocol between the suite's clients and Server.
const (
	// HeaderRequestID names one logical request; every attempt of it carries
	// the same value.
	HeaderRequestID = "X-Request-Id"
	// HeaderBodySum is the hex SHA-256 of the body the client meant to send.
	HeaderBodySum = "X-Body-Sha256"
	// HeaderIdempotencyKey is the idempotency key of a request.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// Faults are the probabilities, each in [0, 1], of the faults Server injects
// into a request it received whole. They are drawn in the order of the
// fields; at most one fault strikes a request. The zero Faults injects
// nothing.
type Faults struct {
	// Storm503 answers 503 with a Retry-After header before the request is
	// applied. Besides this share, every request arriving during a storm
	// (StormEvery, StormLength) gets the same answer.
	Storm503 float64
	// StormEvery and StormLength make 503 storms: for StormLength out of every
	// StormEvery, every request is refused. Zero StormEvery means no storms.
	StormEvery, StormLength time.Duration
	// LongRetryAfter is the share of 503 answers whose Retry-After (1 s) is
	// longer than a call can wait; the others say 0 or a past HTTP-date.
	LongRetryAfter float64

	// After the request is applied:

	// Error500 answers 500 Internal Server Error.
	Error500 float64
	// HalfClose closes the connection's write side without an answer, then
	// waits for the client to close its own.
	HalfClose float64
	// Truncate announces a body and sends part of it before closing.
	Truncate float64
	// Slow sends the body in small pieces with a pause between them.
	Slow float64
	// SlowPause is the pause between the pieces of a slow body; default 1 ms.
	SlowPause time.Duration
}

// Server is an http.Handler that applies requests, injects the server-side
// faults of its Faults, and keeps a ledger of what it received: how many
// times each request was applied and whether every copy of a request's body
// was identical. Build it with NewServer; it is safe for concurrent use.
//
// A request is applied once its body was read whole, unless a 503 refuses
// it. Requests carrying an Idempotency-Key are applied once per key; the
// others once per copy received, so a request sent twice is applied twice.
type Server struct {
	faults Faults
	start  time.Time

	mu      sync.Mutex
	reqs    map[string]*record // by request id
	keys    map[string]bool    // idempotency keys applied
	counter Ledger
}

// record is what the server knows of one logical request.
type record struct {
	method  string
	keyed   bool
	sum     [sha256.Size]byte
	copies  int // copies received whole
	applied int
}

// Ledger is the count of what a Server received.
type Ledger struct {
	Received       int64 // requests received with a whole body
	Incomplete     int64 // requests whose body ended early
	Applied        int64 // applications, counting duplicates
	Requests       int64 // distinct request ids
	Replays        int64 // copies of a request after its first
	Duplicates     int64 // unkeyed non-idempotent requests applied more than once
	KeyedRepeats   int64 // keyed requests received again and answered without applying
	BodyMismatches int64 // copies whose body differed from the client's sum or the first copy
	Faults         map[string]int64
}

// NewServer returns a Server injecting f.
func NewServer(f Faults) *Server {
	if f.SlowPause <= 0 {
		f.SlowPause = time.Millisecond
	}
	return &Server{
		faults: f,
		start:  time.Now(),
		reqs:   make(map[string]*record),
		keys:   make(map[string]bool),
		counter: Ledger{
			Faults: make(map[string]int64),
		},
	}
}

// Ledger returns a copy of the server's counts.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.counter
	l.Faults = make(map[string]int64, len(s.counter.Faults))
	for k, v := range s.counter.Faults {
		l.Faults[k] = v
	}
	l.Requests = int64(len(s.reqs))
	l.Duplicates = 0
	for _, r := range s.reqs {
		if !r.keyed && !idempotentMethod(r.method) && r.applied > 1 {
			l.Duplicates++
		}
	}
	return l
}

func idempotentMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// ServeHTTP reads the request, records it, and answers it, perhaps with a
// fault.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.mu.Lock()
		s.counter.Incomplete++
		s.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	id := r.Header.Get(HeaderRequestID)
	key := r.Header.Get(HeaderIdempotencyKey)
	sum := sha256.Sum256(body)
	want := r.Header.Get(HeaderBodySum)
	storm := s.inStorm(time.Now())

	s.mu.Lock()
	s.counter.Received++
	rec := s.reqs[id]
	if rec == nil {
		rec = &record{method: r.Method, keyed: key != "", sum: sum}
		s.reqs[id] = rec
	} else {
		s.counter.Replays++
	}
	rec.copies++
	if want != "" && want != hex.EncodeToString(sum[:]) || sum != rec.sum {
		s.counter.BodyMismatches++
	}
	f := s.faults
	fault := ""
	switch u := rand.Float64(); {
	case storm || u < f.Storm503:
		fault = "503"
		s.counter.Faults[fault]++
		s.mu.Unlock()
		s.refuse(w)
		return
	}
	// Apply.
	switch {
	case key != "" && s.keys[key]:
		s.counter.KeyedRepeats++
	default:
		if key != "" {
			s.keys[key] = true
		}
		rec.applied++
		s.counter.Applied++
	}
	u := rand.Float64()
	for _, c := range []struct {
		name string
		p    float64
	}{
		{"500", f.Error500}, {"half_close", f.HalfClose}, {"truncate", f.Truncate}, {"slow", f.Slow},
	} {
		if u < c.p {
			fault = c.name
			break
		}
		u -= c.p
	}
	if fault != "" {
		s.counter.Faults[fault]++
	}
	s.mu.Unlock()

	answer := bytes.Repeat([]byte(id+"\n"), 1+len(body)%64)
	switch fault {
	case "500":
		http.Error(w, "chaos: injected failure", http.StatusInternalServerError)
	case "half_close":
		halfClose(w)
	case "truncate":
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)+100))
		w.WriteHeader(http.StatusOK)
		w.Write(answer[:len(answer)/2])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-body
	case "slow":
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		const pieces = 4
		step := (len(answer) + pieces - 1) / pieces
		for i := 0; i < len(answer); i += step {
			if _, err := w.Write(answer[i:min(i+step, len(answer))]); err != nil {
				return
			}
			rc.Flush()
			t := time.NewTimer(f.SlowPause)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
	default:
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
	}
}

// inStorm reports whether now falls in a 503 storm.
func (s *Server) inStorm(now time.Time) bool {
	f := s.faults
	if f.StormEvery <= 0 {
		return false
	}
	return now.Sub(s.start)%f.StormEvery < f.StormLength
}

// refuse answers 503 with a Retry-After header.
func (s *Server) refuse(w http.ResponseWriter) {
	ra := "0"
	switch u := rand.Float64(); {
	case u < s.faults.LongRetryAfter:
		ra = "1"
	case u < (1+s.faults.LongRetryAfter)/2:
		ra = time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)
	}
	w.Header().Set("Retry-After", ra)
	http.Error(w, "chaos: storm", http.StatusServiceUnavailable)
}

// halfClose shuts the write side of the connection without an answer and
// reads until the client closes its side.
func halfClose(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, conn)
}

// BodySum returns the value of HeaderBodySum for a body b.
func BodySum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
