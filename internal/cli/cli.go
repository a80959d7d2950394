package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// ErrUsage marks errors in the command line (exit status 2).
var ErrUsage = errors.New("usage error")

// Usagef returns an error that wraps ErrUsage, for command-line checks made
// after the flags are parsed (a missing flag, values that do not go
// together).
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// NewFlagSet returns a flag set for the command name whose usage reads
// (without the synopsis when it is empty)
//
//	Usage: name synopsis
//
//	summary
//
//	Flags:
//	  -flag ...
//
// and is written to out. Its errors are returned by Parse, never acted on
// by the flag set itself.
func NewFlagSet(name, synopsis, summary string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	line := name
	if synopsis != "" {
		line += " " + synopsis
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\nFlags:\n", line, summary)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args with fs and rejects positional arguments. It returns
// flag.ErrHelp after printing the usage for -h, and an error wrapping
// ErrUsage (printing nothing) for any other problem.
func Parse(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	// Silence the flag set while it parses: it would print its error and
	// the whole usage for every mistake. Exit prints the error once.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return flag.ErrHelp
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUsage, err)
	case fs.NArg() > 0:
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// Exit ends the command name for err: it returns for nil and for
// flag.ErrHelp (the usage is printed), and otherwise prints the error on
// standard error and exits with status 2 for usage errors, 1 for the rest.
func Exit(name string, err error) {
	if code := report(os.Stderr, name, err); code != 0 {
		os.Exit(code)
	}
}

// report writes what Exit prints for err to w and returns the exit status.
func report(w io.Writer, name string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(w, "%s: %v\nRun '%s -h' for usage.\n", name, err, name)
		return 2
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return 1
}
