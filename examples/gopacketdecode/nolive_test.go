//go:build !(cgo && rpsexample_pcap)

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli"
)

// TestNoLive checks that a build without the rpsexample_pcap tag says how
// to get live capture.
func TestNoLive(t *testing.T) {
	err := runMain(context.Background(), []string{"-i", "lo"}, new(bytes.Buffer))
	if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "-tags rpsexample_pcap") {
		t.Errorf("-i without the tag: %v", err)
	}
}
