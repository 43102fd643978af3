// Command root uses the root module as README's install instructions set
// it up in a module of its own: one call through retry.Do that fails once,
// then succeeds.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/steadyhq/retry"
)

func main() {
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
	calls := 0
	v, err := retry.Do(context.Background(), func(context.Context) (string, error) {
		calls++
		if calls == 1 {
			return "", errors.New("transient")
		}
		return "done", nil
	}, r)
	if err != nil || v != "done" || calls != 2 {
		fmt.Fprintf(os.Stderr, "retry.Do = %q, %v after %d calls, want done after 2\n", v, err, calls)
		os.Exit(1)
	}
	fmt.Println("retry.Do: done after 2 calls")
}
