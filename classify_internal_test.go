package retry

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"io"
	"os"
	"testing"
)

// TestInspectPlainMatchesWalk checks that inspect's shortcut for errors.New
// values concludes what the walk of the chain concludes.
func TestInspectPlainMatchesWalk(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "io.EOF", err: io.EOF, want: typeEOF},
		{name: "io.ErrUnexpectedEOF", err: io.ErrUnexpectedEOF, want: typeEOF},
		{name: "context.Canceled", err: context.Canceled, want: typeCanceled},
		{name: "sqldriver.ErrBadConn", err: sqldriver.ErrBadConn, want: typeBadConn},
		{name: "plain", err: errors.New("flaky"), want: typeUnknown},
		{name: "same text as EOF", err: errors.New("EOF"), want: typeUnknown},
		{name: "same text as canceled", err: errors.New("context canceled"), want: typeUnknown},
		{name: "empty", err: errors.New(""), want: typeUnknown},
		{name: "bad scheme", err: errors.New(`unsupported protocol scheme "ftp"`), want: typeRequestInvalid},
		{name: "no host", err: errors.New("http: no Host in request URL"), want: typeRequestInvalid},
		{name: "invalid method", err: errors.New(`net/http: invalid method "G T"`), want: typeRequestInvalid},
		{name: "graceful goaway", err: errors.New(http2GoAwayMessage), want: typeHTTP2GoAway},
		{name: "near a known prefix", err: errors.New("net/http: something else"), want: typeUnknown},
		{name: "first byte known", err: errors.New("h"), want: typeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, walked := inspect(tt.err), inspectChain(tt.err)
			if got != walked {
				t.Fatalf("inspect = %+v, walk = %+v", got, walked)
			}
			if got.typ != tt.want {
				t.Fatalf("type = %q, want %q", got.typ, tt.want)
			}
		})
	}
	// The sentinels of other types take the walk and keep their types.
	for err, want := range map[error]string{
		context.DeadlineExceeded: typeDeadlineExceeded,
		os.ErrDeadlineExceeded:   typeNetTimeout,
	} {
		if got := inspect(err).typ; got != want {
			t.Errorf("inspect(%v) = %q, want %q", err, got, want)
		}
	}
}

// FuzzInspectPlain checks the shortcut against the walk for any message.
func FuzzInspectPlain(f *testing.F) {
	for _, s := range append([]string{"", "EOF", "flaky", http2GoAwayMessage}, requestInvalidPrefixes[:]...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		err := errors.New(msg)
		if got, walked := inspect(err), inspectChain(err); got != walked {
			t.Fatalf("%q: inspect = %+v, walk = %+v", msg, got, walked)
		}
	})
}
