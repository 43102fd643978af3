package retry

import (
	"context"
	"database/sql/driver"
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
		{"io.EOF", io.EOF, typeEOF},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, typeEOF},
		{"context.Canceled", context.Canceled, typeCanceled},
		{"driver.ErrBadConn", driver.ErrBadConn, typeBadConn},
		{"plain", errors.New("flaky"), typeUnknown},
		{"same text as EOF", errors.New("EOF"), typeUnknown},
		{"same text as canceled", errors.New("context canceled"), typeUnknown},
		{"empty", errors.New(""), typeUnknown},
		{"bad scheme", errors.New(`unsupported protocol scheme "ftp"`), typeRequestInvalid},
		{"no host", errors.New("http: no Host in request URL"), typeRequestInvalid},
		{"invalid method", errors.New(`net/http: invalid method "G T"`), typeRequestInvalid},
		{"graceful goaway", errors.New(http2GoAwayMessage), typeHTTP2GoAway},
		{"near a known prefix", errors.New("net/http: something else"), typeUnknown},
		{"first byte known", errors.New("h"), typeUnknown},
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
