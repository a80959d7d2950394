package bpfc

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by the error of an expression that uses a
// construct this compiler does not cover (a host name, protochain, a link
// type other than Ethernet, ...). The error names the construct.
var ErrUnsupported = errors.New("not supported by the built-in compiler")

// Error is an expression libpcap would reject, with the reason (its
// message where the two agree).
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func exprErrorf(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

func syntaxErrorf(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// unsupportedf returns an error wrapping ErrUnsupported that names the
// construct.
func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrUnsupported)
}
