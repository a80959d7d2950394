//go:build linux

package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rpsgo/rps/internal/pace"
)

// senderEnv, set in the environment, makes the bench binary the live
// experiment's sender instead (see senderMain): a process of its own that
// the harness starts in the sending namespace, pinned to a CPU.
const senderEnv = "RPSBENCH_SENDER"

// senderReport is the sender's last line: frames sent, nanoseconds from
// the first to the last, CPU nanoseconds.
const senderReport = "sender: sent %d frames in %d ns, cpu %d ns"

// parseSenderReport reads the sender's last line from its output.
func parseSenderReport(out []byte) (frames int, el, cpu time.Duration, err error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var ns, cpuNs int64
	_, err = fmt.Sscanf(lines[len(lines)-1], senderReport, &frames, &ns, &cpuNs)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the sender's report %q: %w", lines[len(lines)-1], err)
	}
	return frames, time.Duration(ns), time.Duration(cpuNs), nil
}

// senderMain is the sender: it sends the frames args name (pace.Spec.Args)
// with package pace, paced open loop. It prints what it sent and over how
// long, and the CPU time the sending took (its process's start left out),
// to out as senderReport reads them, and returns the exit status.
func senderMain(args []string, out io.Writer) int {
	spec, err := pace.ParseArgs(args)
	if err != nil {
		fmt.Fprintln(out, "sender:", err)
		return 2
	}
	u0, s0 := cpuTimes()
	n, el, err := pace.Send(spec)
	u1, s1 := cpuTimes()
	fmt.Fprintf(out, senderReport+"\n", n, el.Nanoseconds(), (u1 - u0 + s1 - s0).Nanoseconds())
	if err != nil {
		fmt.Fprintln(out, "sender:", err)
		return 1
	}
	return 0
}
