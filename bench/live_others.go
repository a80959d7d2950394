//go:build !linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

const senderEnv = "RPSBENCH_SENDER"

func senderMain(_ []string, out io.Writer) int {
	fmt.Fprintln(out, "sender: needs Linux")
	return 1
}

type liveEnv struct{}

func liveMissing() string { return "live runs need Linux (network namespaces, AF_PACKET)" }

func tcpdumpMissing() string { return "the tcpdump baseline needs Linux" }

func newLiveEnv(string) (*liveEnv, error) { return nil, errors.New("live runs need Linux") }

func (e *liveEnv) Close() error { return nil }

func runLive(context.Context, *liveEnv, Case, spinner, int) (Result, error) {
	return Result{}, errors.New("live runs need Linux")
}
