package capture

import (
	"fmt"
	"os"
	"path/filepath"
)

// OutFile is an output file of a command (-w, -flows). It is opened before
// the input, so that a path that cannot be written fails at once, but a
// run that fails before it steers must not cost the user a file that
// existed: so a regular file is written under a temporary name beside its
// own (".NAME.*.part") and takes its name only at Commit, which replaces
// the file that was there; Abort removes the temporary file. Anything
// else (a device such as /dev/null, a FIFO, a symbolic link such as
// /dev/stdout) is written to directly, opened write-only as tcpdump opens its -w file: a pipe opened
// read-write would read itself, and a write to it would wait forever
// once its reader is gone. Write is not safe for concurrent use.
type OutFile struct {
	f    *os.File
	name string
	tmp  string // the temporary name until Commit; "" when f is name itself
}

// CreateOutFile opens name for writing as OutFile says; flag names the
// option in errors ("-w").
func CreateOutFile(name, flag string) (*OutFile, error) {
	fi, err := os.Lstat(name)
	if err == nil && !fi.Mode().IsRegular() {
		// A device, a FIFO, or a link such as /dev/stdout: written where
		// it leads, cut there if that is a regular file.
		flags := os.O_WRONLY
		if t, err := os.Stat(name); err == nil && t.Mode().IsRegular() {
			flags |= os.O_TRUNC
		}
		f, err := os.OpenFile(name, flags, 0)
		if err != nil {
			return nil, fmt.Errorf("capture: %s: %w", flag, err)
		}
		return &OutFile{f: f, name: name}, nil
	}
	mode := os.FileMode(0o644)
	if err == nil {
		// It will be replaced: it must be one the user may write.
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("capture: %s: %w", flag, err)
		}
		f.Close()
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.part")
	if err != nil {
		return nil, fmt.Errorf("capture: %s: %s: %w", flag, name, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("capture: %s: %w", flag, err)
	}
	return &OutFile{f: f, name: name, tmp: f.Name()}, nil
}

// Name returns the name the file has once committed.
func (o *OutFile) Name() string { return o.name }

// Write writes b.
func (o *OutFile) Write(b []byte) (int, error) { return o.f.Write(b) }

// Chown gives the file to the user uid and group gid, by its descriptor.
func (o *OutFile) Chown(uid, gid int) error { return o.f.Chown(uid, gid) }

// Commit gives the file its name, replacing a file of that name; it may
// come before or after Close, and once is enough.
func (o *OutFile) Commit() error {
	if o.tmp == "" {
		return nil
	}
	if err := os.Rename(o.tmp, o.name); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	o.tmp = ""
	return nil
}

// Close closes the file's descriptor; a file not committed keeps its
// temporary name until Commit or Abort.
func (o *OutFile) Close() error { return o.f.Close() }

// Abort closes the file and removes it if it was never committed, for a
// run that fails before it steers: a file that had the name before is
// left as it was.
func (o *OutFile) Abort() {
	o.f.Close()
	if o.tmp != "" {
		os.Remove(o.tmp)
		o.tmp = ""
	}
}
