//go:build !linux

package main

import (
	"context"
	"errors"
	"time"
)

func rrMissing() string { return "the request/response experiment needs Linux" }

func buildForwarder(context.Context, string) (string, error) {
	return "", errors.New("the forwarder needs Linux")
}

type rrSpec struct {
	Workers  int
	Work     time.Duration
	Conns    int
	Duration time.Duration
}

func runRR(context.Context, string, rrSpec, int) (Result, error) {
	return Result{}, errors.New("the request/response experiment needs Linux")
}
