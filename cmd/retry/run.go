package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/steadyhq/retry"
)

// exitError is a command's exit status as an error. Its type is
// "exit.<code>", so that a policy's non_retryable_errors can name codes
// ("exit.2") or all of them ("exit.*"); a command killed by a signal has
// the shell's code for it, 128 + the signal's number.
type exitError struct {
	code   int
	signal string // the signal that killed the command, if any
}

func (e *exitError) Error() string {
	if e.signal != "" {
		return fmt.Sprintf("killed by %s (exit status %d)", e.signal, e.code)
	}
	return "exit status " + strconv.Itoa(e.code)
}

// ErrorType returns "exit.<code>".
func (e *exitError) ErrorType() string { return "exit." + strconv.Itoa(e.code) }

// startError is a command that could not start: not found (127) or not
// executable (126). It is not retried.
type startError struct {
	code int
	err  error
}

func (e *startError) Error() string     { return e.err.Error() }
func (e *startError) Unwrap() error     { return e.err }
func (e *startError) ErrorType() string { return "exit." + strconv.Itoa(e.code) }

func newRun(e *env) *cobra.Command {
	var (
		pf             policyFlags
		quiet          bool
		attemptTimeout string
		maxElapsed     string
	)
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command, retrying it under a policy; exits with its final status",
		Long: `Run CMD with ARGS (no shell: use sh -c for one) until it exits 0 or the policy stops.

Its standard output and error pass through; standard input goes to the first attempt. Each
failed attempt is reported on standard error (--quiet turns that off). An exit status is the
error type "exit.<code>" (a command killed by a signal has 128 + its number), so that
--non-retryable exit.2 (or a policy's "non_retryable_errors": ["exit.2"]) stops at once on
status 2. A command that is not found (127) or not executable (126) is not retried.
SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to the command; an
interrupt or termination also ends the retries. The exit status is the command's last.

` + presetHelp(),
		Example: `  retry run -- sh -c 'curl -fsS http://127.0.0.1:8080/health'
  retry run --attempts 5 --initial 200ms --non-retryable exit.2 -- ./migrate.sh
  retry run --policy policy.json --attempt-timeout 30s -- make deploy`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("run: give the command after --, as in: retry run -- sh -c 'exit 3'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := pf.policy(e.stdin)
			if err != nil {
				return err
			}
			opts := []retry.Option{retry.WithPolicy(p), retry.WithBudget(retry.Budget{Off: true})}
			if attemptTimeout != "" {
				d, err := positiveDuration("attempt-timeout", attemptTimeout)
				if err != nil {
					return err
				}
				opts = append(opts, retry.WithAttemptTimeout(d))
			}
			if maxElapsed != "" {
				d, err := positiveDuration("max-elapsed", maxElapsed)
				if err != nil {
					return err
				}
				opts = append(opts, retry.WithMaxElapsed(d))
			}
			if !quiet {
				opts = append(opts, retry.OnFailure(func(ev retry.Event) {
					if ev.Reason == "" {
						fmt.Fprintf(e.stderr, "retry: attempt %d: %s (%s); next attempt in %s\n", ev.Attempt, ev.Message, ev.Type, human(ev.Delay))
					}
				}))
			}
			return runCommand(cmd.Context(), e, args, retry.New(opts...), quiet)
		},
	}
	pf.register(cmd.Flags())
	f := cmd.Flags()
	f.BoolVarP(&quiet, "quiet", "q", false, "report nothing on stderr")
	f.StringVar(&attemptTimeout, "attempt-timeout", "", "end an attempt that runs longer (SIGTERM, then SIGKILL 5s later)")
	f.StringVar(&maxElapsed, "max-elapsed", "", "stop retrying when the next wait would end past this, from the start")
	return cmd
}

// positiveDuration parses a duration flag that must be > 0.
func positiveDuration(name, v string) (time.Duration, error) {
	d, err := retry.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("flag --%s = %q: must be a duration > 0 such as 30s, PT30S or 30000 (milliseconds)", name, v)
	}
	return d, nil
}

// runCommand runs args under r and returns the command's final status.
func runCommand(ctx context.Context, e *env, args []string, r *retry.Retrier, quiet bool) error {
	var stdin io.Reader = e.stdin
	err := r.Run(ctx, func(ctx context.Context) error {
		c := exec.CommandContext(ctx, args[0], args[1:]...)
		c.Stdin, c.Stdout, c.Stderr = stdin, e.stdout, e.stderr
		stdin = nil // the input goes to the first attempt
		// An attempt that runs out of time is terminated; on the caller's
		// cancellation the signal that caused it has been forwarded.
		c.Cancel = func() error {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return terminate(c.Process)
			}
			return nil
		}
		c.WaitDelay = 5 * time.Second
		if err := c.Start(); err != nil {
			code := 126
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
				code = 127
			}
			return retry.Permanent(&startError{code: code, err: err})
		}
		if e.signals != nil {
			stop := e.signals(c.Process)
			defer stop()
		}
		err := c.Wait()
		var xe *exec.ExitError
		if errors.As(err, &xe) {
			if se := signaled(xe); se != nil {
				return se
			}
			return &exitError{code: xe.ExitCode()}
		}
		return err
	})
	if err == nil {
		return nil
	}
	code := exitFailure
	var xe *exitError
	var se *startError
	switch {
	case errors.As(err, &xe):
		code = xe.code
	case errors.As(err, &se):
		code = se.code
	}
	var re *retry.Error
	if quiet || !errors.As(err, &re) {
		if se != nil || !errors.As(err, new(*exitError)) {
			return &exitStatus{code: code, err: err}
		}
		return &exitStatus{code: code}
	}
	return &exitStatus{code: code, err: fmt.Errorf("retry: %s after %d %s: %v",
		re.Reason, re.Attempts, plural(re.Attempts, "attempt", "attempts"), re.Err)}
}

// forwardSignals relays the signals a supervisor sends to p until stop.
func forwardSignals(p *os.Process) (stop func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, forwarded...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := range ch {
			_ = p.Signal(s)
		}
	}()
	return func() {
		signal.Stop(ch)
		close(ch)
		<-done
	}
}
