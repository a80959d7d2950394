package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rpsgo/rps/internal/affinity"
)

// Machine describes where a run happened, recorded with every result.
type Machine struct {
	CPU string `json:"cpu"` // model name from /proc/cpuinfo
	// Flags are the CPU features that choose a code path of the library
	// or of the Go runtime (the hash's GFNI and AVX-512 paths), those the
	// CPU has; hypervisor says it is a virtual machine.
	Flags      []string `json:"flags"`
	MHz        float64  `json:"mhz,omitempty"`      // /proc/cpuinfo's "cpu MHz" of the first CPU
	MaxMHz     float64  `json:"max_mhz,omitempty"`  // cpufreq's cpuinfo_max_freq, where readable
	Governor   string   `json:"governor,omitempty"` // cpufreq's scaling_governor, where readable
	Turbo      string   `json:"turbo,omitempty"`    // on or off, where the kernel says
	Cores      int      `json:"cores"`              // runtime.NumCPU: the CPUs this process may use
	CPUSet     []int    `json:"cpu_set"`            // the CPUs this process may run on
	GOMAXPROCS int      `json:"gomaxprocs"`         // runtime.GOMAXPROCS(0)
	Kernel     string   `json:"kernel"`             // uname -srm
	OS         string   `json:"os"`
	Arch       string   `json:"arch"`
	Go         string   `json:"go"` // runtime.Version
	Build      string   `json:"build,omitempty"`
	Commit     string   `json:"commit,omitempty"`
	Root       bool     `json:"root"`
}

// hashFlags are the CPU flags worth recording: the hash and the runtime
// choose their paths by them.
var hashFlags = []string{"gfni", "avx512f", "avx512bw", "avx512vl", "vpclmulqdq", "avx2", "bmi2", "sse4_2", "hypervisor"}

// machine gathers the Machine facts, best effort.
func machine() Machine {
	m := Machine{
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Kernel:     kernel(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Go:         runtime.Version(),
		Build:      buildSettings(),
		Root:       os.Geteuid() == 0,
	}
	m.CPU, m.Flags, m.MHz = cpuInfo()
	if cpus, err := affinity.Allowed(); err == nil {
		m.CPUSet = cpus
	}
	const cpufreq = "/sys/devices/system/cpu/cpu0/cpufreq/"
	if khz, err := strconv.ParseFloat(readTrim(cpufreq+"cpuinfo_max_freq"), 64); err == nil {
		m.MaxMHz = khz / 1e3
	}
	m.Governor = readTrim(cpufreq + "scaling_governor")
	switch {
	case readTrim("/sys/devices/system/cpu/intel_pstate/no_turbo") == "1":
		m.Turbo = "off"
	case readTrim("/sys/devices/system/cpu/intel_pstate/no_turbo") == "0":
		m.Turbo = "on"
	case readTrim("/sys/devices/system/cpu/cpufreq/boost") == "1":
		m.Turbo = "on"
	case readTrim("/sys/devices/system/cpu/cpufreq/boost") == "0":
		m.Turbo = "off"
	}
	m.Commit = buildCommit()
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil && m.Commit == "" {
		m.Commit = strings.TrimSpace(string(out))
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(out) > 0 {
			m.Commit += "+dirty"
		}
	}
	return m
}

// buildCommit returns the commit the binary was built from, as go build
// stamps it (go run does not), with "+dirty" for uncommitted changes.
func buildCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(len(s.Value), 7)]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// readTrim returns the trimmed contents of a small file, or "".
func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// cpuInfo returns the first CPU's model name, the hashFlags it has and its
// clock in MHz from /proc/cpuinfo.
func cpuInfo() (model string, flags []string, mhz float64) {
	model = "unknown (" + runtime.GOARCH + ")"
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return model, nil, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && !seen[k]:
			model = v
		case k == "cpu MHz" && !seen[k]:
			mhz, _ = strconv.ParseFloat(v, 64)
		case k == "flags" && !seen[k]:
			have := strings.Fields(v)
			for _, h := range hashFlags {
				if slices.Contains(have, h) {
					flags = append(flags, h)
				}
			}
		}
		seen[k] = true
	}
	return model, flags, mhz
}

// buildSettings returns the build's settings that change the code: the
// compiler flags, race detector, cgo, GOAMD64 and tags.
func buildSettings() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var out []string
	for _, s := range bi.Settings {
		if strings.HasPrefix(s.Key, "CGO_") && s.Key != "CGO_ENABLED" || strings.HasPrefix(s.Key, "vcs.") && s.Key != "vcs.revision" {
			continue
		}
		out = append(out, s.Key+"="+s.Value)
	}
	return strings.Join(out, " ")
}

func goVersion() string { return runtime.Version() }

// load is the machine's load over a short sample: the kernel's load
// averages, the share of all CPUs busy and the share stolen by the
// hypervisor.
type load struct {
	Load1  float64 `json:"load1"`
	Load5  float64 `json:"load5"`
	Load15 float64 `json:"load15"`
	Busy   float64 `json:"busy"`  // 1 is every CPU busy over the sample
	Steal  float64 `json:"steal"` // the share of CPU time the hypervisor gave to others
	Sample float64 `json:"sample_s"`
}

// cpuTicks are /proc/stat's aggregate CPU counters.
type cpuTicks struct{ total, idle, steal uint64 }

func readCPUTicks() (cpuTicks, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTicks{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTicks{}, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTicks{}, false
	}
	var t cpuTicks
	for i, s := range fields[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		if i >= 8 { // guest and guest_nice are inside user and nice
			break
		}
		t.total += v
		switch i {
		case 3, 4: // idle, iowait
			t.idle += v
		case 7:
			t.steal += v
		}
	}
	return t, true
}

// share returns the busy and stolen shares of the CPU time between a and b.
func share(a, b cpuTicks) (busy, steal float64) {
	d := float64(b.total - a.total)
	if d <= 0 {
		return 0, 0
	}
	return 1 - float64(b.idle-a.idle)/d, float64(b.steal-a.steal) / d
}

// sampleLoad measures the load over d, while this process idles.
func sampleLoad(d time.Duration) load {
	var l load
	if f := strings.Fields(readTrim("/proc/loadavg")); len(f) >= 3 {
		l.Load1, _ = strconv.ParseFloat(f[0], 64)
		l.Load5, _ = strconv.ParseFloat(f[1], 64)
		l.Load15, _ = strconv.ParseFloat(f[2], 64)
	}
	a, ok := readCPUTicks()
	if !ok {
		return l
	}
	time.Sleep(d)
	b, _ := readCPUTicks()
	l.Busy, l.Steal = share(a, b)
	l.Sample = d.Seconds()
	return l
}

// busy says why the machine is too busy for figures to be trusted, or "".
// The process measured idles during the sample, so every busy CPU is
// someone else's.
func (l load) busy(cores int) string {
	var why []string
	if l.Sample > 0 && l.Busy > 0.10 {
		why = append(why, fmt.Sprintf("%.0f%% of the CPUs busy with other work", 100*l.Busy))
	}
	if l.Steal > 0.02 {
		why = append(why, fmt.Sprintf("%.0f%% stolen by the hypervisor", 100*l.Steal))
	}
	if cores > 0 && l.Load1 > 0.5*float64(cores) {
		why = append(why, fmt.Sprintf("load average %.2f on %d CPUs", l.Load1, cores))
	}
	return strings.Join(why, ", ")
}

func (l load) String() string {
	s := fmt.Sprintf("load %.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
	if l.Sample > 0 {
		s += fmt.Sprintf(", %.0f%% busy, %.1f%% steal over %.1f s", 100*l.Busy, 100*l.Steal, l.Sample)
	}
	return s
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
