package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// dropAll is a classic BPF program that drops every frame ("ret #0").
var dropAll = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

// stop has a group's Steering stop its intake, or attaches dropAll to a
// single socket (SO_ATTACH_FILTER, through its SyscallConn): the kernel
// then passes and counts no more frames, while those already in the rings
// stay there to be read.
func (ps packetSockets) stop() error {
	if ps.stopIntake != nil {
		return ps.stopIntake()
	}
	prog := unix.SockFprog{Len: uint16(len(dropAll)), Filter: &dropAll[0]}
	var errs error
	for i, s := range ps.srcs {
		rc, err := s.SyscallConn()
		if err == nil {
			cerr := rc.Control(func(fd uintptr) {
				err = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog)
			})
			if err == nil {
				err = cerr
			}
		}
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("stopping intake at socket %d: %w", i, err))
		}
	}
	return errs
}

// pending counts the sockets whose RX ring holds descriptors not yet
// consumed: poll(2) with no wait reports POLLIN for those (the kernel's
// xsk_poll compares the ring's producer and consumer indices).
func (xs xdpSockets) pending() (uint64, error) {
	var left uint64
	for i, s := range xs.srcs {
		rc, err := s.SyscallConn()
		if err != nil {
			return 0, fmt.Errorf("socket %d: %w", i, err)
		}
		var n int
		cerr := rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				n, err = unix.Poll(pfd, 0)
				if !errors.Is(err, unix.EINTR) {
					break
				}
			}
			if n > 0 && pfd[0].Revents&unix.POLLIN == 0 {
				n = 0
			}
		})
		if err == nil {
			err = cerr
		}
		if err != nil {
			return 0, fmt.Errorf("polling socket %d: %w", i, err)
		}
		if n > 0 {
			left++
		}
	}
	return left, nil
}
