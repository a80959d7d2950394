//go:build !linux

package main

// stop has nothing to stop: the sockets open on Linux only.
func (ps packetSockets) stop() error { return nil }

// pending is zero: the sockets open on Linux only.
func (xs xdpSockets) pending() (uint64, error) { return 0, nil }
