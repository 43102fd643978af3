package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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
// List reads the records back and Replay sends one again, once however
// many operators replay it at the same time.
//
// Every round trip is bounded by Options.Timeout (see Options); Sink's
// also by the context the engine gives it (retry.DeadLetters.Timeout).
//
// A DeadLetters is safe for concurrent use. Build it with NewDeadLetters;
// every method of a nil *DeadLetters (what a failed NewDeadLetters
// returns) returns an error, and panics on none.
type DeadLetters struct {
	client goredis.UniversalClient
	key    string // the stream's key
	maxLen int64
	opts   Options
}

// NewDeadLetters returns the dead-letter stream named stream on client,
// trimmed to about maxLen entries (XADD MAXLEN ~); maxLen <= 0 means
// DefaultMaxLen. The stream's key is opts.Prefix followed by the hash tag
// {deadletters:STREAM} (Stream returns it), so that the keys of Replay's
// claims sit in the stream's slot of a Redis Cluster.
func NewDeadLetters(client goredis.UniversalClient, stream string, maxLen int64, opts Options) (*DeadLetters, error) {
	switch {
	case isNilClient(client):
		return nil, errors.New("redis: NewDeadLetters: client is nil")
	case stream == "":
		return nil, errors.New(`redis: NewDeadLetters: stream = "": must name a stream`)
	}
	opts, err := opts.withDefaults("NewDeadLetters")
	if err != nil {
		return nil, err
	}
	if maxLen <= 0 {
		maxLen = DefaultMaxLen
	}
	return &DeadLetters{client: client, key: opts.key("deadletters", stream), maxLen: maxLen, opts: opts}, nil
}

// Stream returns the Redis key of the stream, for redis-cli and the tools
// that read it directly; "" for a nil *DeadLetters.
func (d *DeadLetters) Stream() string {
	if d == nil {
		return ""
	}
	return d.key
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
	if d == nil {
		return errNilDeadLetters
	}
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
	_, err := roundTrip(ctx, d.opts.Timeout, func(ctx context.Context) (string, error) {
		return d.client.XAdd(ctx, &goredis.XAddArgs{
			Stream: d.key,
			MaxLen: d.maxLen,
			Approx: true,
			Values: values,
		}).Result()
	})
	if err != nil {
		return fmt.Errorf("redis: XADD %s: %w", d.key, err)
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
// none of the records behind it; Delete still takes its ID.
// To page through the stream, pass Page.Next as after until it is "".
// The error is Redis's, or a bad count.
func (d *DeadLetters) List(ctx context.Context, after string, count int64) (Page, error) {
	if d == nil {
		return Page{}, errNilDeadLetters
	}
	if count <= 0 {
		return Page{}, fmt.Errorf("redis: List: count = %d: must be > 0", count)
	}
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := d.xrange(ctx, start, "+", count)
	if err != nil {
		return Page{}, err
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
	if d == nil {
		return Record{}, errNilDeadLetters
	}
	msgs, err := d.xrange(ctx, id, id, 1)
	if err != nil {
		return Record{}, err
	}
	if len(msgs) == 0 {
		return Record{}, fmt.Errorf("redis: dead-letter record %s: %w", id, ErrNoRecord)
	}
	return decodeRecord(msgs[0].ID, msgs[0].Values)
}

// xrange reads up to count entries from start to end, in one round trip.
func (d *DeadLetters) xrange(ctx context.Context, start, end string, count int64) ([]goredis.XMessage, error) {
	msgs, err := roundTrip(ctx, d.opts.Timeout, func(ctx context.Context) ([]goredis.XMessage, error) {
		return d.client.XRangeN(ctx, d.key, start, end, count).Result()
	})
	if err != nil {
		return nil, fmt.Errorf("redis: XRANGE %s: %w", d.key, err)
	}
	return msgs, nil
}

// ErrNoRecord is the error of Get and Replay for an ID not in the stream.
var ErrNoRecord = errors.New("no such record")

// errNilDeadLetters is the error of every method of a nil *DeadLetters,
// such as the one a failed NewDeadLetters returns.
var errNilDeadLetters = errors.New("redis: nil *DeadLetters (check the error of NewDeadLetters)")

// ErrClaimed is the error of Replay for a record that another Replay, in
// this process or another, is sending.
var ErrClaimed = errors.New("record is being replayed")

// Len returns the number of records in the stream.
func (d *DeadLetters) Len(ctx context.Context) (int64, error) {
	if d == nil {
		return 0, errNilDeadLetters
	}
	n, err := roundTrip(ctx, d.opts.Timeout, func(ctx context.Context) (int64, error) {
		return d.client.XLen(ctx, d.key).Result()
	})
	if err != nil {
		return 0, fmt.Errorf("redis: XLEN %s: %w", d.key, err)
	}
	return n, nil
}

// Delete removes the record with entry ID id.
func (d *DeadLetters) Delete(ctx context.Context, id string) error {
	if d == nil {
		return errNilDeadLetters
	}
	_, err := roundTrip(ctx, d.opts.Timeout, func(ctx context.Context) (int64, error) {
		return d.client.XDel(ctx, d.key, id).Result()
	})
	if err != nil {
		return fmt.Errorf("redis: XDEL %s %s: %w", d.key, id, err)
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
// Replay first claims the record in Redis, and holds the claim while send
// runs: a second Replay of the same record meanwhile, from any process,
// returns an error matching ErrClaimed without sending, and one that comes
// after the first has deleted the record returns ErrNoRecord. A record is
// thus sent once by concurrent replays, as long as Redis answers; a claim
// that cannot be renewed (Redis away for ClaimTTL) lapses, and the record
// may then be replayed again. A claim left by a process that died lapses
// after ClaimTTL.
//
// send gets the record, whose Payload carries what the work needs; a
// Transport's record decodes with Record.RequestRecord, and is sent through
// the caller's own client, which re-applies credentials.
func (d *DeadLetters) Replay(ctx context.Context, id string, send func(context.Context, Record) error, opts ...retry.Option) error {
	if d == nil {
		return errNilDeadLetters
	}
	if send == nil {
		return errors.New("redis: Replay: send is nil")
	}
	rec, err := d.Get(ctx, id)
	if err != nil {
		return err
	}
	release, err := d.claim(ctx, rec.ID)
	if err != nil {
		return err
	}
	defer release()
	// Read it again under the claim: a replay that held the claim before
	// may have sent and deleted it since the first read.
	if rec, err = d.Get(ctx, rec.ID); err != nil {
		return err
	}
	err = retry.Run(ctx, func(ctx context.Context) error { return send(ctx, rec) }, opts...)
	if err != nil {
		return err
	}
	// The entry read, whose ID may be longer than id ("5" names "5-0" and
	// XRANGE reads "5-1" too). It was sent: a caller canceled now must not
	// leave it to be sent again.
	return d.Delete(context.WithoutCancel(ctx), rec.ID)
}

// ClaimTTL is how long a Replay's claim on a record lasts unless renewed;
// a running Replay renews it every third of that.
const ClaimTTL = 10 * time.Second

// claimKey names the claim on the record with full entry ID id.
func (d *DeadLetters) claimKey(id string) string { return d.key + ":claim:" + id }

// renewClaim extends the claim KEYS[1] by ARGV[2] ms if ARGV[1] still
// holds it; releaseClaim deletes it if so.
var (
	renewClaim = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	releaseClaim = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)
)

// claim takes the claim on the record with full ID id, or returns an
// error matching ErrClaimed when another Replay holds it. release stops
// the renewal and gives the claim up.
func (d *DeadLetters) claim(ctx context.Context, id string) (release func(), err error) {
	key, token := d.claimKey(id), processID()+":"+strconv.FormatUint(rand.Uint64(), 36)
	ok, err := roundTrip(ctx, d.opts.Timeout, func(ctx context.Context) (bool, error) {
		return d.client.SetNX(ctx, key, token, ClaimTTL).Result()
	})
	if err != nil {
		// The SET may have reached Redis: give up the claim, in case.
		go roundTrip(context.Background(), d.opts.Timeout, func(ctx context.Context) (any, error) {
			return releaseClaim.Run(ctx, d.client, []string{key}, token).Result()
		})
		return nil, fmt.Errorf("redis: SET %s NX: %w", key, err)
	}
	if !ok {
		return nil, fmt.Errorf("redis: dead-letter record %s: %w", id, ErrClaimed)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ClaimTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_, _ = roundTrip(context.Background(), d.opts.Timeout, func(ctx context.Context) (any, error) {
					return renewClaim.Run(ctx, d.client, []string{key}, token, ClaimTTL.Milliseconds()).Result()
				})
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		_, _ = roundTrip(context.WithoutCancel(ctx), d.opts.Timeout, func(ctx context.Context) (any, error) {
			return releaseClaim.Run(ctx, d.client, []string{key}, token).Result()
		})
	}, nil
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
