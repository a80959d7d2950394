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

	"github.com/rpsgo/rps/steer/filter/internal/bpfc"
)

// Compiler says which compiler Compile uses for an expression.
type Compiler int

const (
	// CompilerAuto, the zero value, compiles with the built-in compiler,
	// and with tcpdump only an expression the built-in one does not
	// cover (see the package documentation), when tcpdump is installed.
	CompilerAuto Compiler = iota
	// CompilerBuiltin compiles with the built-in compiler only.
	CompilerBuiltin
	// CompilerTcpdump compiles with tcpdump only.
	CompilerTcpdump
)

var compilerNames = [...]string{CompilerAuto: "auto", CompilerBuiltin: "builtin", CompilerTcpdump: "tcpdump"}

// String returns the compiler's name: auto, builtin or tcpdump.
func (c Compiler) String() string {
	if c >= 0 && int(c) < len(compilerNames) {
		return compilerNames[c]
	}
	return fmt.Sprintf("Compiler(%d)", int(c))
}

// MarshalText returns the compiler's name.
func (c Compiler) MarshalText() ([]byte, error) {
	if c < 0 || int(c) >= len(compilerNames) {
		return nil, fmt.Errorf("filter: unknown compiler %d", int(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText sets c from its name.
func (c *Compiler) UnmarshalText(text []byte) error {
	for i, name := range compilerNames {
		if string(text) == name {
			*c = Compiler(i)
			return nil
		}
	}
	return fmt.Errorf("filter: unknown compiler %q (want auto, builtin or tcpdump)", text)
}

// Options tune Compile. The zero value compiles for capture files.
type Options struct {
	// Interface, when set, compiles an expression for a live capture on
	// this interface, as `tcpdump -i Interface` would attach it (see the
	// package documentation: on Linux it also reads the out-of-band VLAN
	// tag). Compile must then run in the interface's network namespace;
	// tcpdump, if it compiles the expression, also needs capture
	// privileges.
	Interface string
	// Compiler chooses the compiler; the zero value is CompilerAuto.
	Compiler Compiler
	// Tcpdump is the tcpdump to compile expressions with. Empty means
	// "tcpdump", looked up in PATH.
	Tcpdump string
	// Timeout bounds the tcpdump run. Zero means 10 seconds.
	Timeout time.Duration
}

// Compile returns the program for text: a program as tcpdump prints it with
// -dd or -ddd (see Parse and IsProgram), or a filter expression in
// pcap-filter(7) syntax, compiled by the built-in compiler or by tcpdump
// (Options.Compiler). An expression the compiler rejects is an error
// wrapping ErrExpression, with its message; one no available compiler
// covers, an error wrapping ErrNoCompiler that names the construct.
// Arguments given as tcpdump takes them ("tcp", "port", "80") are joined
// with spaces first.
func Compile(opts Options, text ...string) (*Program, error) {
	expr := strings.TrimSpace(strings.Join(text, " "))
	if expr == "" {
		return nil, &exprError{msg: "empty expression"}
	}
	if IsProgram(expr) {
		return Parse(expr)
	}
	switch opts.Compiler {
	case CompilerTcpdump:
		return compileTcpdump(expr, opts)
	case CompilerAuto, CompilerBuiltin:
	default:
		return nil, fmt.Errorf("filter: compiling %q: unknown compiler %v", expr, opts.Compiler)
	}
	p, err := compileBuiltin(expr, opts)
	if !errors.Is(err, bpfc.ErrUnsupported) {
		return p, err
	}
	if opts.Compiler == CompilerBuiltin {
		return nil, fmt.Errorf("%w: compiling %q: %v", ErrNoCompiler, expr, err)
	}
	if _, lookErr := exec.LookPath(tcpdumpBin(opts)); lookErr != nil {
		return nil, fmt.Errorf("%w: compiling %q: %v, and tcpdump, which does, is not installed (%v); "+
			"give the program instead, as `tcpdump -dd %s` prints it on a machine that has tcpdump",
			ErrNoCompiler, expr, err, lookErr, shellQuote(expr))
	}
	return compileTcpdump(expr, opts)
}

// compileBuiltin compiles expr with the built-in compiler.
func compileBuiltin(expr string, opts Options) (*Program, error) {
	live := opts.Interface != ""
	if live {
		if err := checkLinkType(opts.Interface); err != nil {
			return nil, err
		}
	}
	raw, err := bpfc.Compile(expr, bpfc.Options{Live: live})
	var perr *bpfc.Error
	switch {
	case errors.As(err, &perr):
		return nil, &exprError{expr: expr, msg: perr.Msg}
	case err != nil:
		return nil, err
	}
	return New(raw, expr)
}

func tcpdumpBin(opts Options) string {
	if opts.Tcpdump != "" {
		return opts.Tcpdump
	}
	return "tcpdump"
}

func compileTcpdump(expr string, opts Options) (*Program, error) {
	path, err := exec.LookPath(tcpdumpBin(opts))
	if err != nil {
		return nil, fmt.Errorf("%w: compiling %q with tcpdump: %v; "+
			"give the program instead, as `tcpdump -dd %s` prints it on a machine that has tcpdump", ErrNoCompiler, expr, err, shellQuote(expr))
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	// The file form first: it needs no interface, so its errors are the
	// expression's, but for one that rejects every frame with the tag in
	// the frame ("tcp and vlan"), which the live form may not.
	raw, msg, err := runTcpdump(path, timeout, expr, "-y", "EN10MB")
	if msg != "" && (opts.Interface == "" || !strings.Contains(msg, "rejects all packets")) {
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
