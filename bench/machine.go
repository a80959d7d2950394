package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a run happened, recorded with every result.
type Machine struct {
	CPU        string `json:"cpu"`        // model name from /proc/cpuinfo
	Cores      int    `json:"cores"`      // runtime.NumCPU: the CPUs this process may use
	GOMAXPROCS int    `json:"gomaxprocs"` // runtime.GOMAXPROCS(0)
	Kernel     string `json:"kernel"`     // uname -srm
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Go         string `json:"go"` // runtime.Version
	Commit     string `json:"commit,omitempty"`
	Root       bool   `json:"root"`
}

// machine gathers the Machine facts, best effort.
func machine() Machine {
	m := Machine{
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Kernel:     kernel(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Go:         runtime.Version(),
		Root:       os.Geteuid() == 0,
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(out) > 0 {
			m.Commit += "+dirty"
		}
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + runtime.GOARCH + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown (" + runtime.GOARCH + ")"
}

// commandLine returns the command that made the results, quoted for a
// shell.
func commandLine() string {
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		if i == 0 {
			a = "go run ./bench" // os.Args[0] is a temporary binary under go run
			if !strings.Contains(os.Args[0], "go-build") {
				a = os.Args[0]
			}
			args[i] = a
			continue
		}
		if a == "" || strings.ContainsAny(a, " \t\"'$\\*?;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args[i] = a
	}
	return strings.Join(args, " ")
}

// usage is a snapshot of the process's CPU time and allocation count.
type usage struct {
	wall      time.Time
	user, sys time.Duration
	mallocs   uint64
}

func snapshot() usage {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := usage{mallocs: ms.Mallocs}
	u.user, u.sys = cpuTimes()
	u.wall = time.Now()
	return u
}
