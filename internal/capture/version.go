package capture

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Version returns the build's version: the main module's version ("(devel)"
// for a build from a working tree), then the VCS revision and a "+dirty"
// mark when the build recorded them.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))] + dirty
	}
	return v
}

// WriteVersion prints what -version prints, as tcpdump -version does: the
// command and its version, then the Go version and platform.
func WriteVersion(w io.Writer, command string) error {
	_, err := fmt.Fprintf(w, "%s version %s\n%s %s/%s\n", command, Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
