//go:build !linux

package main

import (
	"context"
	"errors"
	"runtime"
)

func run(context.Context, Options, bool) error {
	return errors.New("AF_PACKET forwarding needs Linux, not " + runtime.GOOS)
}
