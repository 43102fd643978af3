package retryz

import (
	"time"

	"github.com/steadyhq/retry"
)

// Version is the version of Snapshot's JSON: it changes only when a field
// changes meaning or goes away; fields may be added within a version.
const Version = 1

// Snapshot is the document served with ?format=json: what the page shows,
// as read at Time. Names and keys pass through package redact. Each list
// is sorted by name.
type Snapshot struct {
	Version  int       `json:"version"` // Version
	Time     time.Time `json:"time"`    // when the sources were read
	Clients  []Client  `json:"clients"`
	Shedders []Server  `json:"shedders"`
	Fleet    []Member  `json:"fleet"`
	// Collected counts the sources dropped because the program no
	// longer used them (their Retrier, Transport or Shedder was
	// collected); Refused, the registrations refused because 256 sources
	// were registered.
	Collected int64 `json:"collected"`
	Refused   int64 `json:"refused"`
}

// Client is a Retrier or a Transport: its counters, a page of its keys,
// and its recent breaker changes and denials.
type Client struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`            // "retrier" or "transport"
	Error string `json:"error,omitempty"` // why nothing can be read (a nil Transport)
	// Stats holds the counters of retry.Stats, under its JSON names; its
	// per-key maps and its lists are left out here, for Keys, Changes
	// and Denials below carry them.
	Stats retry.Stats `json:"stats"`
	// KeysTotal is the number of keys any gate keeps (one, "", for gates
	// that are not kept per key), and BreakerStates counts them by
	// breaker state (closed, half_open, open) when there is a breaker.
	KeysTotal     int            `json:"keys_total"`
	BreakerStates map[string]int `json:"breaker_states,omitempty"`
	// Keys is a page of the keys (?offset, ?limit): open breakers first,
	// then half-open ones, then by adaptive throttling's probability and
	// by the share of the concurrency limit in use, highest first, then
	// by key.
	Keys     []Key         `json:"keys"`
	Offset   int           `json:"offset"`  // of the first of Keys among all
	Changes  []Change      `json:"changes"` // Stats.BreakerChanges, oldest first
	Denials  []retry.Event `json:"denials"` // Stats.Denials, oldest first
	Activity Series        `json:"activity"`
}

// Change is a change of a breaker's state (retry.Stats.BreakerChanges):
// the breaker's key, the states it left and entered (closed, half_open,
// open) and when.
type Change struct {
	Key  string    `json:"key"`
	From string    `json:"from"`
	To   string    `json:"to"`
	Time time.Time `json:"time"`
}

// Key is the state of the gates of one key: each field is set only when
// a gate keeps it for the key.
type Key struct {
	Key string `json:"key"` // "" for gates not kept per key
	// Breaker is its breaker's state (closed, half_open or open), and
	// Since the time of its last change among Client.Changes (zero when
	// none is listed).
	Breaker string    `json:"breaker,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// OnFleet says, with a breaker shared through a store, whether its
	// last decision was made on the fleet's state.
	OnFleet *bool `json:"on_fleet,omitempty"`
	// Budget is the retries its budget would grant now.
	Budget *float64 `json:"budget,omitempty"`
	// Tokens is the rate limit's tokens in its bucket.
	Tokens *float64 `json:"tokens,omitempty"`
	// Throttle is the probability with which adaptive throttling sheds
	// an attempt now.
	Throttle *float64 `json:"throttle,omitempty"`
	// Limit and InFlight are the concurrency limit and the attempts
	// holding a permit.
	Limit    *int `json:"limit,omitempty"`
	InFlight *int `json:"in_flight,omitempty"`
}

// Server is a Shedder: its state and counters (shed.Stats).
type Server struct {
	Name     string `json:"name"`
	Error    string `json:"error,omitempty"`
	Limit    int    `json:"limit"`
	InFlight int    `json:"in_flight"`
	Queued   int    `json:"queued"`
	Admitted int64  `json:"admitted"`
	// Shed counts the requests shed, by reason: queue_full,
	// queue_timeout, low_priority, canceled, quota, client_share.
	Shed map[string]int64 `json:"shed"`
	// DrainRate is the requests completed per second, as last measured.
	DrainRate float64 `json:"drain_rate"`
	// RetryAfter is the come-back delay, in seconds, told the last
	// request shed for overload; 0 before one.
	RetryAfter float64 `json:"retry_after"`
	Activity   Series  `json:"activity"`
}

// Member is a fleet component (see Fleet).
type Member struct {
	Name     string    `json:"name"`
	Error    string    `json:"error,omitempty"`
	OnFleet  bool      `json:"on_fleet"`
	LastSync time.Time `json:"last_sync,omitzero"` // zero before the first
	Errors   int64     `json:"errors"`             // round trips that failed
	Activity Series    `json:"activity"`
}

// Series is a source's activity per second, oldest first, from Start: the
// last five minutes at most, from the first reading of the source on (the
// page reads its sources only while someone looks; a gap between two
// readings holds the average of its seconds). A Client has Attempts,
// Failures, Retries and Denials (calls stopped by the budget, a breaker,
// the rate limit, adaptive throttling or the concurrency limit); a
// Server, Admitted and Shed; a Member, Errors.
type Series struct {
	Start    time.Time `json:"start,omitzero"`
	Attempts []int64   `json:"attempts,omitempty"`
	Failures []int64   `json:"failures,omitempty"`
	Retries  []int64   `json:"retries,omitempty"`
	Denials  []int64   `json:"denials,omitempty"`
	Admitted []int64   `json:"admitted,omitempty"`
	Shed     []int64   `json:"shed,omitempty"`
	Errors   []int64   `json:"errors,omitempty"`
}
