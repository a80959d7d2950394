//go:build linux

package xsk

// Helpers of the internal tests that the external ones (shared_linux_test.go,
// which opens afxdp sockets) use too.
var SendChecked = sendChecked
