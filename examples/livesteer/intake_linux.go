package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/steer/afpacket"
)

// dropAll is a classic BPF program that drops every frame ("ret #0").
var dropAll = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

// stopIntake attaches dropAll to every socket (SO_ATTACH_FILTER, through
// the socket's SyscallConn): the kernel then passes and counts no more
// frames, while those already in the rings stay there to be read.
func stopIntake(socks []*afpacket.Source) error {
	prog := unix.SockFprog{Len: uint16(len(dropAll)), Filter: &dropAll[0]}
	var errs error
	for i, s := range socks {
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
