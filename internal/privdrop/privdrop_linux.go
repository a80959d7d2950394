//go:build linux

package privdrop

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Drop makes every thread of the process t (see the package
// documentation) and checks that it did (Check). It needs root, or
// CAP_SETUID, CAP_SETGID and, for the bounding set, CAP_SETPCAP. On an
// error the process may be left part way: the caller should exit.
func Drop(t Target) (Dropped, error) {
	var d Dropped
	groups := t.Groups
	if groups == nil {
		groups = []int{}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return d, fmt.Errorf("privdrop: setgroups %v: %w", groups, err)
	}
	if err := syscall.Setresgid(t.GID, t.GID, t.GID); err != nil {
		return d, fmt.Errorf("privdrop: setresgid %d: %w", t.GID, err)
	}
	// The bounding set and no_new_privs are per thread: set them in every
	// thread, where the runtime can (not with cgo).
	last, err := lastCap()
	if err != nil {
		return d, err
	}
	d.BoundingSet = true
	for c := 0; c <= last; c++ {
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); e != 0 {
			if e == syscall.ENOTSUP {
				d.BoundingSet = false
				break
			}
			return d, fmt.Errorf("privdrop: dropping capability %d from the bounding set: %w", c, e)
		}
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e == 0 {
		d.NoNewPrivs = true
	} else if e != syscall.ENOTSUP {
		return d, fmt.Errorf("privdrop: setting no_new_privs: %w", e)
	}
	if err := syscall.Setresuid(t.UID, t.UID, t.UID); err != nil {
		return d, fmt.Errorf("privdrop: setresuid %d: %w", t.UID, err)
	}
	d.Threads, err = Check(t)
	return d, err
}

// lastCap reads the highest capability the kernel knows.
func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("privdrop: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("privdrop: cap_last_cap %q: %w", b, err)
	}
	return n, nil
}

// Check reads the credentials of every thread of the process
// (/proc/self/task/*/status) and returns how many there are, or an error
// naming a thread whose user or group IDs are not all t's, or that holds
// a capability (permitted, effective or ambient).
func Check(t Target) (threads int, err error) {
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(dirs) == 0 {
		return 0, fmt.Errorf("privdrop: listing the threads: %v", err)
	}
	var errs []error
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread has exited
			}
			return threads, fmt.Errorf("privdrop: %w", err)
		}
		threads++
		tid := filepath.Base(filepath.Dir(p))
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			f := strings.Fields(v)
			switch k {
			case "Uid", "Gid":
				want := strconv.Itoa(t.UID)
				if k == "Gid" {
					want = strconv.Itoa(t.GID)
				}
				for _, id := range f {
					if id != want {
						errs = append(errs, fmt.Errorf("thread %s: %s %v, want all %s", tid, k, f, want))
						break
					}
				}
			case "CapPrm", "CapEff", "CapAmb":
				if len(f) == 1 && strings.Trim(f[0], "0") != "" {
					errs = append(errs, fmt.Errorf("thread %s: %s %s", tid, k, f[0]))
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return threads, fmt.Errorf("privdrop: the drop did not reach every thread: %w", err)
	}
	return threads, nil
}
