// Command retry shows what a retry policy does before it ships.
//
//	retry demo                                  a flaky loopback server, a plain client beside retry.Transport
//	retry schedule --preset zizq --jitter none  the delays of a policy, as a table or --json
//	retry plot --attempts 12 -o curve.svg       the backoff curve with its jitter band (SVG or PNG)
//	retry sim --outage 30s:60s --rate 100       an outage on the real engine, in virtual time
//	retry run -- CMD ARGS                       a command retried under a policy
//	retry get URL                               a request through retry.Transport, attempts on stderr
//	retry --version                             the release it was built from, or (devel)
//
// A bad flag or a bad policy is reported on one line of standard error with
// exit status 2; `retry run` exits with the command's own final status, and
// `retry get`, when no response came, with curl's status for the cause (6
// the host did not resolve, 7 no connection, 28 timed out; see retry get
// --help).
//
// Install it with
//
//	go install github.com/steadyhq/retry/cmd/retry@latest
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{
		stdin:    os.Stdin,
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		terminal: term.IsTerminal(int(os.Stderr.Fd())),
		signals:  forwardSignals,
	}
	code := execute(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

// env is what a command reads and writes: the process's streams in main,
// buffers in tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// terminal says whether stderr is a terminal: progress bars are drawn
	// only then, unless --progress says otherwise.
	terminal bool
	// signals, when set, starts forwarding the process's signals to a
	// running command; the returned function stops it. Nil in tests.
	signals func(p *os.Process) (stop func())

	progress string // the --progress flag: auto, always or never
}

// showProgress reports whether progress bars are drawn on stderr.
func (e *env) showProgress() bool {
	switch e.progress {
	case "always":
		return true
	case "never":
		return false
	}
	return e.terminal
}

// Exit statuses other than a command's own.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // a bad flag, argument or policy
)

// usageError is an error in what the user gave: it exits with status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage wraps err as a usage error.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// usagef formats a usage error.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitStatus ends the process with a given status, after the command has
// said what it had to say.
type exitStatus struct {
	code int
	err  error // printed when set
}

func (e *exitStatus) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// execute runs the command line args and returns the process's exit status.
func execute(ctx context.Context, e *env, args []string) int {
	root := newRoot(e)
	if args == nil {
		args = []string{} // not os.Args
	}
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var st *exitStatus
	if errors.As(err, &st) {
		if st.err != nil {
			fmt.Fprintln(e.stderr, line(st.err))
		}
		return st.code
	}
	fmt.Fprintln(e.stderr, line(err))
	var ue *usageError
	if errors.As(err, &ue) || !errors.As(err, new(*runError)) {
		// Cobra's own errors (unknown command, missing argument) are usage
		// errors too; only errors marked as failures of a run exit 1.
		return exitUsage
	}
	return exitFailure
}

// runError marks a failure of a command that was used correctly.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// failed wraps err as a failure of the run (exit status 1).
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &runError{err}
}

// typeRules restate, by the type of a flag, the parse errors pflag
// reports in strconv's words.
var typeRules = map[string]string{
	"bool":           "must be true or false",
	"int":            "must be an integer",
	"uint64":         "must be an integer >= 0",
	"float64":        "must be a number",
	"stringToString": "must be name=value",
}

// line renders err as one line prefixed with "retry: ".
func line(err error) string {
	msg := err.Error()
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) {
		rule := typeRules[ive.GetFlag().Value.Type()]
		if rule == "" {
			rule = errors.Unwrap(ive).Error()
		}
		msg = fmt.Sprintf("flag --%s = %q: %s", ive.GetFlag().Name, ive.GetValue(), rule)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if !strings.HasPrefix(msg, "retry: ") {
		msg = "retry: " + msg
	}
	return msg
}

// noArgs refuses any argument to a command that takes only flags.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s: argument = %q: must be none; %s takes only flags (see %s --help)",
			cmd.Name(), args[0], cmd.Name(), cmd.CommandPath())
	}
	return nil
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "retry",
		Short: "See what a retry policy does before it ships",
		Long: `retry shows what a retry policy of github.com/steadyhq/retry does: its schedule,
its curve, its behaviour in an outage, and the engine itself around a command or a request.

Start with "retry demo".`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A bare "retry" prints the help and succeeds.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		// --version prints "retry v1.2.3": see buildVersion.
		Version: currentVersion(),
	}
	root.SetVersionTemplate("retry {{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().StringVar(&e.progress, "progress", "auto",
		"progress bars on stderr: auto (when stderr is a terminal), always or never")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch e.progress {
		case "auto", "always", "never":
			return nil
		}
		return usagef("flag --progress = %q: must be auto, always or never", e.progress)
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	root.AddCommand(
		newDemo(e),
		newSchedule(e),
		newPlot(e),
		newSim(e),
		newRun(e),
		newGet(e),
	)
	return root
}
