package redis_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestDeadLetters: a Transport's failed requests are written to the stream,
// listed with their payload, and one is replayed through the same policy
// once the server recovers, which deletes it.
func TestDeadLetters(t *testing.T) {
	s := startServer(t)
	dl, err := retryredis.NewDeadLetters(s.Client(), "dl:test", 0, retryredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var healthy atomic.Bool
	var hits atomic.Int64
	var lastBody atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		lastBody.Store(string(b))
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, OnExhaustion: retry.ExhaustDeadLetter}),
		retry.WithDeadLetter(retry.DeadLetters{Sink: dl.Sink}),
		retry.WithBudget(retry.Budget{Off: true}),
	)
	// The replay below sends the body again: the record must keep it.
	client := &http.Client{Transport: retry.NewTransport(srv.Client().Transport, r, retry.WithHTTP(retry.HTTP{RecordBody: true}))}
	ctx := t.Context()
	for _, body := range []string{`{"order":1}`, `{"order":2}`} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/orders?token=secret", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", resp.StatusCode)
		}
	}
	if st := r.Stats(); st.DeadLettered != 2 || st.DeadLetterFailed != 0 {
		t.Fatalf("dead_lettered %d, dead_letter_failed %d; want 2 and 0", st.DeadLettered, st.DeadLetterFailed)
	}
	if hits.Load() != 6 {
		t.Fatalf("server saw %d requests, want 6", hits.Load())
	}

	page, err := dl.List(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	recs := page.Records
	if len(recs) != 2 || len(page.Bad) != 0 || page.Next != recs[1].ID {
		t.Fatalf("listed %d records, want 2", len(recs))
	}
	rec := recs[1]
	if rec.Attempts != 3 || rec.Reason != "exhausted" || rec.Type != "http.5xx.503" || rec.Method != http.MethodPut ||
		strings.Contains(rec.URL, "secret") || rec.First.IsZero() || rec.Time.Before(rec.First) {
		t.Fatalf("record %+v", rec)
	}
	rr, err := rec.RequestRecord()
	if err != nil {
		t.Fatal(err)
	}
	if string(rr.Body) != `{"order":2}` || !rr.BodyComplete || rr.Header.Get("Authorization") != "" {
		t.Fatalf("payload %+v", rr)
	}
	// Paging: after the first record comes the second only.
	page, err = dl.List(ctx, recs[0].ID, 10)
	if err != nil || len(page.Records) != 1 || page.Records[0].ID != rec.ID {
		t.Fatalf("page after %s: %+v, %v", recs[0].ID, page, err)
	}

	// Replay while the server still fails: the record stays.
	send := func(ctx context.Context, rec retryredis.Record) error {
		rr, err := rec.RequestRecord()
		if err != nil {
			return retry.Permanent(err)
		}
		req, err := http.NewRequestWithContext(ctx, rr.Method, srv.URL+"/orders", bytes.NewReader(rr.Body))
		if err != nil {
			return retry.Permanent(err)
		}
		resp, err := srv.Client().Do(req) // the caller's own client
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			return errors.New(resp.Status)
		}
		return nil
	}
	before := hits.Load()
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond})
	if err := dl.Replay(ctx, rec.ID, send, policy); err == nil {
		t.Fatal("replay succeeded against a failing server")
	}
	if n := hits.Load() - before; n != 3 {
		t.Fatalf("failed replay sent %d attempts, want 3 (attempts reset)", n)
	}
	if n, _ := dl.Len(ctx); n != 2 {
		t.Fatalf("%d records after a failed replay, want 2", n)
	}

	healthy.Store(true)
	if err := dl.Replay(ctx, rec.ID, send, policy); err != nil {
		t.Fatal(err)
	}
	if lastBody.Load() != `{"order":2}` {
		t.Fatalf("replayed body %q", lastBody.Load())
	}
	page, err = dl.List(ctx, "", 10)
	if err != nil || len(page.Records) != 1 || page.Records[0].ID == rec.ID {
		t.Fatalf("after replay: %+v, %v; want the other record only", page, err)
	}
	if _, err := dl.Get(ctx, rec.ID); !errors.Is(err, retryredis.ErrNoRecord) {
		t.Fatalf("Get of a replayed record: %v", err)
	}
	if err := dl.Replay(ctx, rec.ID, send); !errors.Is(err, retryredis.ErrNoRecord) {
		t.Fatalf("second replay: %v", err)
	}
}

// TestDeadLettersBounded: the stream is trimmed near its bound, and with
// Redis down the sink's error reaches Stats and the call's error.
func TestDeadLettersBounded(t *testing.T) {
	s := startServer(t)
	dl, err := retryredis.NewDeadLetters(s.Client(), "dl:bounded", 10, retryredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i := range 1000 {
		if err := dl.Sink(ctx, retry.Event{Attempt: 1, Key: "k", Message: "m", Time: time.Unix(int64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	// MAXLEN ~ trims whole macro nodes (100 entries by default).
	if n, _ := dl.Len(ctx); n < 10 || n > 200 {
		t.Fatalf("stream holds %d entries, want about 10", n)
	}
	if err := dl.Sink(ctx, retry.Event{Payload: func() {}}); err == nil {
		t.Fatal("a payload that is not JSON was accepted")
	}

	s.Stop()
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter}), retry.WithDeadLetter(retry.DeadLetters{Sink: dl.Sink}))
	err = r.Run(ctx, func(context.Context) error { return errors.New("boom") })
	if err == nil || !strings.Contains(err.Error(), "XADD") {
		t.Fatalf("error %v, want the sink's XADD failure joined", err)
	}
	if st := r.Stats(); st.DeadLetterFailed != 1 {
		t.Fatalf("dead_letter_failed %d, want 1", st.DeadLetterFailed)
	}
}

func TestNewDeadLettersErrors(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		name   string
		client goredis.UniversalClient
		stream string
		want   string
	}{
		{name: "nil client", stream: "s", want: "redis: NewDeadLetters: client is nil"},
		{name: "no stream", client: c, want: `redis: NewDeadLetters: stream = "": must name a stream`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := retryredis.NewDeadLetters(tc.client, tc.stream, 0, retryredis.Options{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDeadLettersReplayID: Replay deletes the entry it sent, by its full
// ID, also when given an ID without its sequence part, and nothing else.
func TestDeadLettersReplayID(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	tests := []struct {
		name     string
		id       string
		err      error    // want errors.Is
		sent     string   // the ID of the record sent; "" for none
		leftOver []string // IDs in the stream afterwards
	}{
		{name: "full ID", id: "5-2", sent: "5-2", leftOver: []string{"5-1", "6-0"}},
		{name: "ID without its sequence", id: "5", sent: "5-1", leftOver: []string{"5-2", "6-0"}},
		{name: "ID of no entry", id: "7", err: retryredis.ErrNoRecord, leftOver: []string{"5-1", "5-2", "6-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			dl, err := retryredis.NewDeadLetters(c, "dl:replay:"+tt.name, 0, retryredis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			stream := dl.Stream()
			for _, id := range []string{"5-1", "5-2", "6-0"} {
				if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: stream, ID: id, Values: []any{"key", "k", "attempts", "3"}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var sent []string
			err = dl.Replay(ctx, tt.id, func(_ context.Context, r retryredis.Record) error {
				sent = append(sent, r.ID)
				return nil
			})
			if !errors.Is(err, tt.err) {
				t.Fatalf("Replay(%q): %v, want %v", tt.id, err, tt.err)
			}
			if strings.Join(sent, " ") != tt.sent {
				t.Errorf("sent %v, want %q", sent, tt.sent)
			}
			msgs, err := c.XRange(ctx, stream, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, m := range msgs {
				left = append(left, m.ID)
			}
			if strings.Join(left, " ") != strings.Join(tt.leftOver, " ") {
				t.Errorf("stream holds %v after Replay(%q), want %v", left, tt.id, tt.leftOver)
			}
		})
	}
}

// TestDeadLettersListBad: entries that do not decode are skipped and
// reported with their ID and error; the records behind them are listed,
// and paging by Page.Next reaches every entry, even past a page of bad
// entries only.
func TestDeadLettersListBad(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	good := []any{"key", "k", "attempts", "2"}
	bad := []any{"attempts", "-1"}
	tests := []struct {
		name    string
		entries [][]any // in stream order, IDs 1-0, 2-0, ...
		count   int64
		pages   []string // per page: "g" for a record, "b" for a bad entry
	}{
		{name: "no bad entry", entries: [][]any{good, good}, count: 10, pages: []string{"gg", ""}},
		{name: "a bad entry first", entries: [][]any{bad, good, good}, count: 10, pages: []string{"bgg", ""}},
		{name: "bad entries between", entries: [][]any{good, bad, bad, good}, count: 10, pages: []string{"gbbg", ""}},
		{name: "a page of bad entries only", entries: [][]any{good, bad, bad, good}, count: 2, pages: []string{"gb", "bg", ""}},
		{name: "only bad entries", entries: [][]any{bad, bad, bad}, count: 2, pages: []string{"bb", "b", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			dl, err := retryredis.NewDeadLetters(c, "dl:list:"+tt.name, 0, retryredis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range tt.entries {
				if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: dl.Stream(), ID: strconv.Itoa(i+1) + "-0", Values: v}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			after, n := "", 0
			for i, want := range tt.pages {
				p, err := dl.List(ctx, after, tt.count)
				if err != nil {
					t.Fatalf("page %d: %v", i, err)
				}
				// Merge the page back into stream order by ID.
				kinds := map[string]byte{}
				for _, r := range p.Records {
					if r.Key != "k" || r.Attempts != 2 {
						t.Errorf("page %d: record %+v", i, r)
					}
					kinds[r.ID] = 'g'
				}
				for _, b := range p.Bad {
					if b.Err == nil || !strings.Contains(b.Err.Error(), "dead-letter record "+b.ID+": field attempts = \"-1\"") {
						t.Errorf("page %d: bad entry %s: error %v", i, b.ID, b.Err)
					}
					kinds[b.ID] = 'b'
				}
				var got []byte
				for j := range len(kinds) {
					got = append(got, kinds[strconv.Itoa(n+j+1)+"-0"])
				}
				if string(got) != want {
					t.Fatalf("page %d after %q: %q (%+v), want %q", i, after, got, p, want)
				}
				n += len(kinds)
				wantNext := ""
				if want != "" {
					wantNext = strconv.Itoa(n) + "-0"
				}
				if p.Next != wantNext {
					t.Fatalf("page %d: Next %q, want %q", i, p.Next, wantNext)
				}
				after = p.Next
			}
			// Delete takes a bad entry's ID.
			p, err := dl.List(ctx, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range p.Bad {
				if err := dl.Delete(ctx, b.ID); err != nil {
					t.Fatalf("Delete(%s): %v", b.ID, err)
				}
			}
			if p, err = dl.List(ctx, "", 100); err != nil || len(p.Bad) != 0 {
				t.Errorf("after deleting the bad entries: %+v, %v; want none left", p.Bad, err)
			}
		})
	}
}
