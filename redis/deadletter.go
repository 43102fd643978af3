package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

// DefaultMaxLen is the default bound of a dead-letter stream: older records
// are trimmed past it.
const DefaultMaxLen = 100_000

// DeadLetters keeps dead-letter records in a Redis Stream, one entry per
// record. Its Sink method is a dead-letter sink for retry.DeadLetters;
// List reads the records back and Replay sends one again.
//
// A DeadLetters is safe for concurrent use. Build it with NewDeadLetters.
type DeadLetters struct {
	client goredis.UniversalClient
	stream string
	maxLen int64
}

// NewDeadLetters returns the dead-letter stream named stream on client,
// trimmed to about maxLen entries (XADD MAXLEN ~); maxLen <= 0 means
// DefaultMaxLen.
func NewDeadLetters(client goredis.UniversalClient, stream string, maxLen int64) (*DeadLetters, error) {
	switch {
	case client == nil:
		return nil, errors.New("redis: NewDeadLetters: client is nil")
	case stream == "":
		return nil, errors.New(`redis: NewDeadLetters: stream = "": must name a stream`)
	}
	if maxLen <= 0 {
		maxLen = DefaultMaxLen
	}
	return &DeadLetters{client: client, stream: stream, maxLen: maxLen}, nil
}

// Record is a dead-letter record as kept in the stream: the fields of the
// retry.Event that produced it, without the unsanitized error.
type Record struct {
	ID       string    // the stream entry's ID, which Replay and Delete take
	Key      string    // the call's key
	Attempts int       // the attempts the call ran
	Type     string    // the type of the last failure
	Message  string    // the sanitized message of the last failure
	Reason   string    // why the call stopped, such as "exhausted"
	Method   string    // HTTP method, for a Transport's record
	URL      string    // URL without credentials, for a Transport's record
	First    time.Time // the call's first failure
	Time     time.Time // its last failure
	// Payload is the event's Payload encoded as JSON (a Transport's
	// *retry.RequestRecord, or what the caller attached); nil if none.
	Payload json.RawMessage
}

// RequestRecord decodes the Payload of a Transport's record.
func (r Record) RequestRecord() (*retry.RequestRecord, error) {
	if len(r.Payload) == 0 {
		return nil, fmt.Errorf("redis: record %s has no payload", r.ID)
	}
	var rr retry.RequestRecord
	if err := json.Unmarshal(r.Payload, &rr); err != nil {
		return nil, fmt.Errorf("redis: record %s: payload: %w", r.ID, err)
	}
	return &rr, nil
}

// The stream entry's field names.
const (
	fieldKey      = "key"
	fieldAttempts = "attempts"
	fieldType     = "type"
	fieldMessage  = "message"
	fieldReason   = "reason"
	fieldMethod   = "method"
	fieldURL      = "url"
	fieldFirst    = "first"
	fieldTime     = "time"
	fieldPayload  = "payload"
)

// Sink appends ev to the stream, trimming it to about its bound. It has
// the signature retry.DeadLetters.Sink takes; the engine bounds ctx with
// retry.DeadLetters.Timeout, and an error (Redis down, or a Payload that
// cannot be encoded as JSON) is counted in Stats.DeadLetterFailed and joined
// into the call's error.
func (d *DeadLetters) Sink(ctx context.Context, ev retry.Event) error {
	values := []any{
		fieldKey, ev.Key,
		fieldAttempts, strconv.Itoa(ev.Attempt),
		fieldType, ev.Type,
		fieldMessage, ev.Message,
		fieldReason, ev.Reason.String(),
		fieldMethod, ev.Method,
		fieldURL, ev.URL,
		fieldFirst, formatTime(ev.First),
		fieldTime, formatTime(ev.Time),
	}
	if ev.Payload != nil {
		p, err := json.Marshal(ev.Payload)
		if err != nil {
			return fmt.Errorf("redis: dead-letter payload: %w", err)
		}
		values = append(values, fieldPayload, p)
	}
	err := d.client.XAdd(ctx, &goredis.XAddArgs{
		Stream: d.stream,
		MaxLen: d.maxLen,
		Approx: true,
		Values: values,
	}).Err()
	if err != nil {
		return fmt.Errorf("redis: XADD %s: %w", d.stream, err)
	}
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// List reads up to count entries from the oldest, starting after the entry
// ID after ("" for the start of the stream). An entry that does not decode
// to a Record (written by another program, or by hand) is skipped and
// reported in Page.Bad with its ID and error, so that one bad entry hides
// none of the records behind it; Get, Delete and Replay still take its ID.
// To page through the stream, pass Page.Next as after until it is "".
// The error is Redis's, or a bad count.
func (d *DeadLetters) List(ctx context.Context, after string, count int64) (Page, error) {
	if count <= 0 {
		return Page{}, fmt.Errorf("redis: List: count = %d: must be > 0", count)
	}
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := d.client.XRangeN(ctx, d.stream, start, "+", count).Result()
	if err != nil {
		return Page{}, fmt.Errorf("redis: XRANGE %s: %w", d.stream, err)
	}
	p := Page{Records: make([]Record, 0, len(msgs))}
	for _, m := range msgs {
		r, err := decodeRecord(m.ID, m.Values)
		if err != nil {
			p.Bad = append(p.Bad, BadEntry{ID: m.ID, Err: err})
		} else {
			p.Records = append(p.Records, r)
		}
		p.Next = m.ID
	}
	return p, nil
}

// Page is what List read: the records, oldest first, the entries it skipped,
// and where the next page starts.
type Page struct {
	Records []Record
	Bad     []BadEntry // entries that do not decode, oldest first
	// Next is the ID of the last entry read, good or bad: List's after for
	// the next page. It is "" when no entry was read, at the stream's end.
	Next string
}

// BadEntry is a stream entry that List skipped: its ID and the error of
// decoding it, which names the field, its value and the rule.
type BadEntry struct {
	ID  string
	Err error
}

// Get returns the record with entry ID id. As in XRANGE, an ID without its
// sequence part ("1700000000000") names the first entry of that
// millisecond; the record's ID is then the entry's full ID.
func (d *DeadLetters) Get(ctx context.Context, id string) (Record, error) {
	msgs, err := d.client.XRangeN(ctx, d.stream, id, id, 1).Result()
	if err != nil {
		return Record{}, fmt.Errorf("redis: XRANGE %s: %w", d.stream, err)
	}
	if len(msgs) == 0 {
		return Record{}, fmt.Errorf("redis: dead-letter record %s: %w", id, ErrNoRecord)
	}
	return decodeRecord(msgs[0].ID, msgs[0].Values)
}

// ErrNoRecord is the error of Get and Replay for an ID not in the stream.
var ErrNoRecord = errors.New("no such record")

// Len returns the number of records in the stream.
func (d *DeadLetters) Len(ctx context.Context) (int64, error) {
	n, err := d.client.XLen(ctx, d.stream).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: XLEN %s: %w", d.stream, err)
	}
	return n, nil
}

// Delete removes the record with entry ID id.
func (d *DeadLetters) Delete(ctx context.Context, id string) error {
	if err := d.client.XDel(ctx, d.stream, id).Err(); err != nil {
		return fmt.Errorf("redis: XDEL %s %s: %w", d.stream, id, err)
	}
	return nil
}

// Replay sends the record with entry ID id again, as a manual retry: send
// runs through a fresh call of retry.Run with opts (typically the Retrier
// that failed it, so the same policy applies), its attempts starting from
// one. On success the record sent (the entry Get(id) returns, by its full
// ID) is deleted from the stream; on failure it is kept and Replay returns
// the call's error (a Retrier whose sink is this stream also appends a new
// record for the failed replay).
//
// send gets the record, whose Payload carries what the work needs; a
// Transport's record decodes with Record.RequestRecord, and is sent through
// the caller's own client, which re-applies credentials.
func (d *DeadLetters) Replay(ctx context.Context, id string, send func(context.Context, Record) error, opts ...retry.Option) error {
	if send == nil {
		return errors.New("redis: Replay: send is nil")
	}
	rec, err := d.Get(ctx, id)
	if err != nil {
		return err
	}
	err = retry.Run(ctx, func(ctx context.Context) error { return send(ctx, rec) }, opts...)
	if err != nil {
		return err
	}
	// The entry read, whose ID may be longer than id ("5" names "5-0" and
	// XRANGE reads "5-1" too).
	return d.Delete(ctx, rec.ID)
}

// decodeRecord parses a stream entry's fields into a Record. An entry with
// a field of the wrong form is an error naming the entry, the field and the
// value; unknown fields are ignored.
func decodeRecord(id string, values map[string]any) (Record, error) {
	r := Record{ID: id}
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("redis: dead-letter record %s: field %s = %q: %s", id, field, v, rule)
	}
	for field, v := range values {
		s, ok := v.(string)
		if !ok {
			return r, bad(field, fmt.Sprint(v), "must be a string")
		}
		switch field {
		case fieldKey:
			r.Key = s
		case fieldAttempts:
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return r, bad(field, s, "must be a whole number >= 0")
			}
			r.Attempts = n
		case fieldType:
			r.Type = s
		case fieldMessage:
			r.Message = s
		case fieldReason:
			r.Reason = s
		case fieldMethod:
			r.Method = s
		case fieldURL:
			r.URL = s
		case fieldFirst, fieldTime:
			var t time.Time
			if s != "" {
				var err error
				if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
					return r, bad(field, s, "must be an RFC 3339 time")
				}
			}
			if field == fieldFirst {
				r.First = t
			} else {
				r.Time = t
			}
		case fieldPayload:
			if !json.Valid([]byte(s)) {
				return r, bad(field, s, "must be JSON")
			}
			r.Payload = json.RawMessage(s)
		}
	}
	return r, nil
}
