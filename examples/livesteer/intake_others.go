//go:build !linux

package main

import "github.com/rpsgo/rps/steer/afpacket"

// stopIntake has nothing to stop: AF_PACKET sockets open on Linux only.
func stopIntake([]*afpacket.Source) error { return nil }
