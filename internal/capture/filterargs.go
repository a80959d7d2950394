package capture

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer/filter"
)

// FilterFlags are the ways to give a capture filter: tcpdump's trailing
// arguments, -f EXPR, or -F FILE (tcpdump's -F: the expression, or a
// program as tcpdump -dd prints it, read from a file). At most one of them.
type FilterFlags struct {
	expr, file string
}

// Register adds -f and -F to fs.
func (f *FilterFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.expr, "f", "", "capture filter `expression` in tcpdump's syntax (or a program as tcpdump -dd prints it); the same as giving it after the flags")
	fs.StringVar(&f.file, "F", "", "read the capture filter from `file`, as tcpdump -F does")
}

// Text returns the filter the command line gives, "" for none, from the
// flags and the trailing arguments args. Giving more than one is a usage
// error, as is a -F file that cannot be read.
func (f *FilterFlags) Text(args []string) (string, error) {
	n := 0
	for _, given := range []bool{f.expr != "", f.file != "", len(args) > 0} {
		if given {
			n++
		}
	}
	if n > 1 {
		return "", cli.Usagef("give the filter once: as arguments after the flags, with -f or with -F")
	}
	switch {
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return "", cli.Usagef("-F: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	case f.expr != "":
		return strings.TrimSpace(f.expr), nil
	}
	return strings.TrimSpace(strings.Join(args, " ")), nil
}

// FilterError returns err, from compiling a filter, as the command reports
// it: a usage error for an expression or a program that is not valid, any
// other error (no tcpdump, an interface tcpdump could not open) as it is.
func FilterError(err error) error {
	if errors.Is(err, filter.ErrExpression) || errors.Is(err, filter.ErrProgram) {
		return fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	return err
}
