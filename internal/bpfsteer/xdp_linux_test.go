//go:build linux

package bpfsteer

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
)

// steering is a loaded program the agreement tests run: the socket
// filter, or the XDP program built to return the socket index it would
// redirect to.
type steering interface {
	ebpfProgram() *ebpf.Program
}

// hooks are the hooks the agreement tests cover.
var hooks = []Hook{HookSocketFilter, HookXDP}

// forHooks runs body once per hook, as a subtest named after it.
func forHooks(t *testing.T, body func(t *testing.T, hook Hook)) {
	t.Helper()
	for _, h := range hooks {
		t.Run(h.String(), func(t *testing.T) { body(t, h) })
	}
}

// loadHook loads the program for opts at opts.Hook; an XDP program returns
// the index it would redirect to.
func loadHook(t testing.TB, opts Options) steering {
	t.Helper()
	if opts.Hook == HookSocketFilter {
		return load(t, opts)
	}
	opts.testReturn = true
	return loadXDP(t, opts, 1)
}

// loadXDP loads an XDP program with sockets slots.
func loadXDP(t testing.TB, opts Options, sockets int) *XDP {
	t.Helper()
	x, err := NewXDP(opts, sockets)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("verifier rejected the XDP program: %+v", ve)
		}
		t.Fatalf("NewXDP: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}
