//go:build linux

package livesock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Interface looks up the interface named name in the calling thread's
// network namespace. When there is none, its error says so in the words
// of ip(8), naming the namespace (the initial one, or its name under
// /run/netns as ip netns identify finds it) and the interfaces that are
// there; it wraps the net package's error without repeating its text.
func Interface(name string) (*net.Interface, error) {
	ifi, err := net.InterfaceByName(name)
	if err == nil {
		return ifi, nil
	}
	var names []string
	if all, lerr := net.Interfaces(); lerr == nil {
		for _, i := range all {
			names = append(names, i.Name)
		}
	}
	there := "it has none"
	if len(names) > 0 {
		there = "its interfaces are " + strings.Join(names, ", ")
	}
	return nil, &noInterface{fmt.Sprintf("device %q does not exist in %s; %s", name, Namespace(), there), err}
}

// noInterface is Interface's error: a message of its own over the net
// package's error.
type noInterface struct {
	msg string
	err error
}

func (e *noInterface) Error() string { return e.msg }
func (e *noInterface) Unwrap() error { return e.err }

// Namespace describes the calling thread's network namespace for a
// message: "the initial network namespace" (init's, when the process may
// read init's), `network namespace "NAME"` for one named under
// /run/netns, or the kernel's name for it (net:[INODE]).
func Namespace() string {
	self, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		return "this network namespace"
	}
	init, err := os.Readlink("/proc/1/ns/net")
	if err == nil && init == self {
		return "the initial network namespace"
	}
	var st unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &st) == nil {
		ents, _ := os.ReadDir("/run/netns")
		for _, e := range ents {
			var nst unix.Stat_t
			if unix.Stat(filepath.Join("/run/netns", e.Name()), &nst) == nil && nst.Dev == st.Dev && nst.Ino == st.Ino {
				return fmt.Sprintf("network namespace %q", e.Name())
			}
		}
	}
	if err == nil {
		return "network namespace " + self + " (not the initial one)"
	}
	return "network namespace " + self
}

// Need is what an operation needs of the process, for Explain.
type Need int

const (
	// NeedRaw is a packet or AF_XDP socket's: CAP_NET_RAW.
	NeedRaw Need = iota
	// NeedBPF is loading an eBPF program and its maps: CAP_BPF.
	NeedBPF
	// NeedXDP is attaching an XDP program to an interface: CAP_NET_ADMIN.
	NeedXDP
	// NeedMemlock is registering an AF_XDP UMEM: locked memory.
	NeedMemlock
)

// Capability numbers (include/uapi/linux/capability.h).
const (
	capNetAdmin = 12
	capNetRaw   = 13
	capIPCLock  = 14
	capSysAdmin = 21
	capBPF      = 39
)

var capNames = map[int]string{capNetAdmin: "CAP_NET_ADMIN", capNetRaw: "CAP_NET_RAW", capIPCLock: "CAP_IPC_LOCK",
	capSysAdmin: "CAP_SYS_ADMIN", capBPF: "CAP_BPF"}

// Explain returns err with what to change when it says that the process
// lacks what need names: for EPERM or EACCES the privileges (root, or the
// capabilities, and which of them the calling thread lacks), for a
// locked-memory refusal the limit (RLIMIT_MEMLOCK, now) and the way
// around it. Any other error, and nil, it returns as it is. The result
// wraps err.
func Explain(err error, need Need) error {
	if err == nil {
		return nil
	}
	denied := errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
	switch {
	case need == NeedMemlock && (denied || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM)):
		return fmt.Errorf("%w (the UMEM is locked memory: it counts against RLIMIT_MEMLOCK, %s now (ulimit -l), "+
			"unless the process has CAP_IPC_LOCK%s; raise the limit, or lower Config.NumFrames)", err, memlock(), lacking(capIPCLock))
	case !denied:
		return err
	case need == NeedRaw:
		return fmt.Errorf("%w (a packet or AF_XDP socket needs root or CAP_NET_RAW%s)", err, lacking(capNetRaw))
	case need == NeedBPF:
		return fmt.Errorf("%w (loading the library's eBPF program needs root, or CAP_BPF (CAP_SYS_ADMIN before Linux 5.8)%s; "+
			"before Linux 5.11 its maps also count against RLIMIT_MEMLOCK, %s now)", err, lacking(capBPF), memlock())
	case need == NeedXDP:
		return fmt.Errorf("%w (attaching an XDP program needs root, or CAP_NET_ADMIN and CAP_BPF%s)", err, lacking(capNetAdmin, capBPF))
	}
	return err
}

// lacking says which of caps the calling thread's effective set lacks,
// as ", which the process lacks" phrases, or "" when it has them all (or
// they cannot be read).
func lacking(caps ...int) string {
	eff, ok := effective()
	if !ok {
		return ""
	}
	var missing []string
	for _, c := range caps {
		if eff&(1<<c) == 0 {
			missing = append(missing, capNames[c])
		}
	}
	switch len(missing) {
	case 0:
		return ""
	case 1:
		return "; the process lacks " + missing[0]
	}
	return "; the process lacks " + strings.Join(missing, " and ")
}

// effective returns the calling thread's effective capabilities.
func effective() (uint64, bool) {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// memlock describes the soft RLIMIT_MEMLOCK.
func memlock() string {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r) != nil {
		return "unknown"
	}
	if r.Cur == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", r.Cur/1024)
}
