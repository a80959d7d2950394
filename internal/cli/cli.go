package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrUsage marks errors in the command line (exit status 2).
var ErrUsage = errors.New("usage error")

// Usagef returns an error that wraps ErrUsage, for command-line checks made
// after the flags are parsed (a missing flag, values that do not go
// together).
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// UsageError returns err marked as a usage error (exit status 2), its
// message kept: for a value the command passes on unchecked and a library
// rejects, such as a configuration error of package steer. A command tests
// for the library's sentinel itself, so that this package imports no
// library:
//
//	if errors.Is(err, steer.ErrConfig) {
//		err = cli.UsageError(err)
//	}
//
// UsageError(nil) is nil.
func UsageError(err error) error {
	if err == nil || errors.Is(err, ErrUsage) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUsage, err)
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
// (without the Flags section when the command has no flags) and is written
// to out. Its errors are returned by Parse, never acted on by the flag set
// itself.
func NewFlagSet(name, synopsis, summary string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	line := name
	if synopsis != "" {
		line += " " + synopsis
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n", line, summary)
		flags := 0
		fs.VisitAll(func(*flag.Flag) { flags++ })
		if flags > 0 {
			fmt.Fprintf(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// Parse parses args with fs and rejects positional arguments. It returns
// flag.ErrHelp after printing the usage for -h, and an error wrapping
// ErrUsage (printing nothing) for any other problem.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// ParseWithArgs is Parse for a command that takes positional arguments
// after its flags, as tcpdump takes a filter expression: it returns them.
// As package flag does, it stops at the first argument that is not a flag,
// so a flag after the positional arguments is a usage error that says the
// flags go first (after "--", nothing is taken for a flag).
func ParseWithArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	rest := fs.Args()
	if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
		return rest, nil // "--" ends the flags: what follows is taken as it is
	}
	for _, a := range rest {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name != "" && fs.Lookup(name) != nil {
			return nil, Usagef("flag %s after the arguments %q: flags go first", a, strings.Join(rest, " "))
		}
	}
	return rest, nil
}

func parse(fs *flag.FlagSet, args []string) error {
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
