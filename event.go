package retry

import (
	"slices"
	"time"
)

// Event describes a failed attempt to the hooks and, as a dead-letter record,
// to the sink.
//
// Err is the real error, for programs; Message is Err's text passed through
// the sanitizer, and is what logs, metrics, records and tools should use.
//
// In JSON (as in Stats.Denials) its fields have the names given beside
// them; Err and Payload are left out, Message stands for Err.
type Event struct {
	Attempt int    `json:"attempt"`           // the attempt that failed, 1 for the first
	Err     error  `json:"-"`                 // the attempt's error
	Message string `json:"message,omitempty"` // Err's text, sanitized
	// Type is TypeOf the error, or timeout.attempt; a call the breaker,
	// the rate limiter or another gate stopped has the gate's type
	// (breaker.open, ratelimit.local), but one the retry budget stopped
	// has the type of the failure whose retry it denied (Reason says the
	// budget).
	Type    string        `json:"type,omitempty"`
	Delay   time.Duration `json:"delay,omitempty"`  // the wait before the next attempt (OnRetry); in JSON, nanoseconds
	Reason  Reason        `json:"reason,omitempty"` // why the call stops; zero when a retry follows
	Key     string        `json:"key"`              // the call's key (WithKey, or the Transport's key)
	Method  string        `json:"method,omitempty"` // HTTP method, for the Transport
	URL     string        `json:"url,omitempty"`    // request URL without credentials, for the Transport
	First   time.Time     `json:"first,omitzero"`   // when the call's first failure happened
	Time    time.Time     `json:"time"`             // when this failure happened
	Payload any           `json:"-"`                // what a dead-letter record needs to replay the work
	// Balance is the retry budget's balance for Key when the event was
	// made, in tokens (see Budget): after this failure's retry took its
	// token, or, when the budget denied the retry (Reason budget), what
	// it had then (under one token, or for a retry after a timeout, what
	// it may not spend). It is below zero while a Shadow
	// budget is overdrawn: an event with a negative Balance and no Reason
	// is a retry the budget would have denied. Zero without a budget of
	// the Retrier's own (Budget.Off, Budget.Shared).
	Balance float64 `json:"balance"`
}

// OnRetry adds a hook called before each wait, only when a retry will happen.
// Hooks run synchronously on the calling goroutine, in the order given.
func OnRetry(f func(Event)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.hooks.retry = append(c.hooks.retry, f)
		}
	})
}

// OnFailure adds a hook called for every failed attempt, retried or not. On
// the last one, Event.Reason says why the call stops.
func OnFailure(f func(Event)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.hooks.failure = append(c.hooks.failure, f)
		}
	})
}

// OnGiveUp adds a hook called once when a call ends without success, with
// Event.Reason saying why. Event.Err is the last attempt's error, or what
// stopped the call when no attempt ran (Event.Attempt is then 0): the
// breaker's, the limiter's or the context's error. It runs after OnFailure
// and after the dead-letter sink and alert (DeadLetters).
func OnGiveUp(f func(Event)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.hooks.giveUp = append(c.hooks.giveUp, f)
		}
	})
}

// hooks are the event hooks of a configuration, in the order given.
type hooks struct {
	retry, failure, giveUp []func(Event)
}

// any reports whether any hook is set.
func (h *hooks) any() bool {
	return len(h.retry) > 0 || len(h.failure) > 0 || len(h.giveUp) > 0
}

// clip returns h whose lists a later append copies rather than shares.
func (h hooks) clip() hooks {
	return hooks{slices.Clip(h.retry), slices.Clip(h.failure), slices.Clip(h.giveUp)}
}

// fire calls each hook of list with ev.
func fire(list []func(Event), ev Event) {
	for _, h := range list {
		h(ev)
	}
}

// event builds the Event of the current failure.
func (c *call) event(drv *driver, o outcome, now time.Time) Event {
	key := c.eventKey()
	method, url := drv.describeOr()
	ev := Event{
		Attempt: c.attempt,
		Err:     c.last,
		Message: c.cfg.sanitize(c.last.Error()),
		Type:    o.typ,
		Key:     key,
		Method:  method,
		URL:     url,
		First:   c.first,
		Time:    now,
	}
	if bs := c.cfg.budget; bs != nil {
		ev.Balance, _ = bs.balance(c.key, now)
	}
	return ev
}

// eventKey returns the key of the call's events: its own, or the
// configuration's.
func (c *call) eventKey() string {
	if c.key == "" {
		return c.cfg.key
	}
	return c.key
}

// describeOr returns the method and URL of events from the driver, or
// nothing without one.
func (drv *driver) describeOr() (method, url string) {
	if drv != nil && drv.describe != nil {
		return drv.describe()
	}
	return "", ""
}
