//go:build linux

package privdrop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/netns"
)

// childEnv makes the test binary the child of TestDrop.
const childEnv = "PRIVDROP_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child runs in a process of its own: with eight goroutines holding OS
// threads of their own (so that the process has many), it opens a packet
// socket as root, drops to uid and gid 65534, and then reports on its
// last line what it could still do: read the socket it holds, open a new
// one, go back to root.
func child() int {
	var ready, hold sync.WaitGroup
	hold.Add(1)
	for range 8 {
		ready.Add(1)
		go func() {
			runtime.LockOSThread()
			ready.Done()
			hold.Wait()
		}()
	}
	ready.Wait()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		fmt.Println("child: packet socket as root:", err)
		return 1
	}
	t, err := Lookup("65534")
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	d, err := Drop(t)
	hold.Done()
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	_, gerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	_, serr := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	rerr := syscall.Setresuid(0, 0, 0)
	fmt.Printf("threads %d bounding %v nonewprivs %v uid %d euid %d; held socket: %v; new socket: %v; back to root: %v\n",
		d.Threads, d.BoundingSet, d.NoNewPrivs, os.Getuid(), os.Geteuid(), gerr, errName(serr), errName(rerr))
	return 0
}

func errName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return fmt.Sprint(err)
}

// TestDrop runs the child as root: after Drop, every thread (nine at
// least) has uid and gid 65534 and no capability (Check), the packet
// socket opened before still answers, a new one is refused (EPERM, no
// CAP_NET_RAW), and the process cannot become root again (EPERM). Built
// without cgo the bounding set is emptied and no_new_privs set too.
func TestDrop(t *testing.T) {
	netns.Require(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	var threads int
	var bounding, nnp bool
	var uid, euid int
	if _, err := fmt.Sscanf(last, "threads %d bounding %t nonewprivs %t uid %d euid %d;", &threads, &bounding, &nnp, &uid, &euid); err != nil {
		t.Fatalf("child said %q: %v", last, err)
	}
	t.Log(last)
	if threads < 9 || uid != 65534 || euid != 65534 {
		t.Errorf("child: %d threads checked, uid %d, euid %d; want 9 or more, 65534", threads, uid, euid)
	}
	for _, want := range []string{"held socket: <nil>", "new socket: EPERM", "back to root: EPERM"} {
		if !strings.Contains(last, want) {
			t.Errorf("child: %q lacks %q", last, want)
		}
	}
	if cgo := bounding != nnp; cgo {
		t.Errorf("bounding set emptied %v, no_new_privs %v: both or neither", bounding, nnp)
	}
}

// TestLookup finds users by name and by number, and takes a number no
// user has as it is.
func TestLookup(t *testing.T) {
	root, err := Lookup("root")
	if err != nil || root.UID != 0 || root.GID != 0 {
		t.Errorf("root: %+v, %v", root, err)
	}
	byID, err := Lookup("0")
	if err != nil || byID.UID != 0 || byID.Name != "root" {
		t.Errorf("0: %+v, %v", byID, err)
	}
	odd, err := Lookup("54321")
	if err != nil || odd.UID != 54321 || odd.GID != 54321 || len(odd.Groups) != 0 {
		t.Errorf("54321: %+v, %v", odd, err)
	}
	if _, err := Lookup("rps-no-such-user"); err == nil {
		t.Error("a user that does not exist was found")
	}
}
