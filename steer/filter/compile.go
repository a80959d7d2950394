package filter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/net/bpf"
)

// Options tune Compile. The zero value compiles for capture files.
type Options struct {
	// Interface, when set, compiles an expression for a live capture on
	// this interface, as `tcpdump -i Interface` would attach it (see the
	// package documentation: on Linux it also reads the out-of-band VLAN
	// tag). Compile must then run in the interface's network namespace,
	// with capture privileges.
	Interface string
	// Tcpdump is the tcpdump to compile expressions with. Empty means
	// "tcpdump", looked up in PATH.
	Tcpdump string
	// Timeout bounds the tcpdump run. Zero means 10 seconds.
	Timeout time.Duration
}

// Compile returns the program for text: a program as tcpdump prints it with
// -dd or -ddd (see Parse and IsProgram), or a filter expression in
// pcap-filter(7) syntax, compiled by tcpdump. An expression tcpdump rejects
// is an error wrapping ErrExpression, with tcpdump's message; without
// tcpdump, an error wrapping ErrNoCompiler. Arguments given as tcpdump takes
// them ("tcp", "port", "80") are joined with spaces first.
func Compile(opts Options, text ...string) (*Program, error) {
	expr := strings.TrimSpace(strings.Join(text, " "))
	if expr == "" {
		return nil, &exprError{msg: "empty expression"}
	}
	if IsProgram(expr) {
		return Parse(expr)
	}
	return compileTcpdump(expr, opts)
}

func compileTcpdump(expr string, opts Options) (*Program, error) {
	bin := opts.Tcpdump
	if bin == "" {
		bin = "tcpdump"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: compiling %q needs tcpdump, and %v; "+
			"give the program instead, as `tcpdump -dd %s` prints it on a machine that has tcpdump", ErrNoCompiler, expr, err, shellQuote(expr))
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	// The file form first: it needs no interface, so its errors are the
	// expression's.
	raw, msg, err := runTcpdump(path, timeout, expr, "-y", "EN10MB")
	if msg != "" {
		return nil, &exprError{expr: expr, msg: msg}
	}
	if err != nil {
		return nil, err
	}
	if opts.Interface != "" {
		raw, msg, err = runTcpdump(path, timeout, expr, "-i", opts.Interface, "-p")
		if msg != "" {
			err = errors.New(msg)
		}
		if err != nil {
			return nil, fmt.Errorf("filter: compiling %q for a live capture on %s: %w", expr, opts.Interface, err)
		}
	}
	return New(raw, expr)
}

// runTcpdump runs tcpdump -dd with args and reads the program it prints.
// When tcpdump itself fails, msg is what it said.
func runTcpdump(path string, timeout time.Duration, expr string, args ...string) (raw []bpf.RawInstruction, msg string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(args, "-dd", "--", expr)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimPrefix(lastLine(stderr.String()), "tcpdump: ")
		var exit *exec.ExitError
		if errors.As(err, &exit) && ctx.Err() == nil && msg != "" {
			return nil, msg, nil
		}
		return nil, "", fmt.Errorf("filter: running tcpdump to compile %q: %w: %s", expr, err, msg)
	}
	raw, err = parseDD(stdout.String())
	if err != nil {
		return nil, "", fmt.Errorf("filter: reading tcpdump's program for %q: %w", expr, err)
	}
	return raw, "", nil
}

// exprError is an expression the compiler rejected, with its message.
type exprError struct{ expr, msg string }

func (e *exprError) Error() string { return fmt.Sprintf("filter %q: %s", e.expr, e.msg) }

// Is makes the error match ErrExpression.
func (e *exprError) Is(target error) bool { return target == ErrExpression }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .:/-_") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
