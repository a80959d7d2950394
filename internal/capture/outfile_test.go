package capture

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOutFile: a regular file is written under a temporary name beside it
// and takes its name at Commit, replacing what was there with its mode
// kept; Abort leaves a file that existed as it was and nothing beside it;
// a device and a link are written where they lead.
func TestOutFile(t *testing.T) {
	dir := t.TempDir()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	entries := func() int { e, _ := os.ReadDir(dir); return len(e) }

	// A new file: not there until Commit.
	o, err := CreateOutFile(filepath.Join(dir, "new.pcap"), "-w")
	if err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("new"))
	if _, err := os.Stat(filepath.Join(dir, "new.pcap")); err == nil {
		t.Error("the file has its name before Commit")
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := read("new.pcap"); got != "new" || entries() != 1 {
		t.Errorf("after Commit: %q, %d entries", got, entries())
	}

	// An existing file: Abort keeps it, Commit replaces it.
	old := filepath.Join(dir, "old.pcap")
	if err := os.WriteFile(old, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = CreateOutFile(old, "-w")
	if err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("during"))
	o.Abort()
	if got := read("old.pcap"); got != "before" || entries() != 2 {
		t.Errorf("after Abort: %q, %d entries; want it as before, and nothing beside", got, entries())
	}
	o, err = CreateOutFile(old, "-w")
	if err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("after"))
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if fi, err := os.Stat(old); err != nil || fi.Mode().Perm() != 0o600 || read("old.pcap") != "after" {
		t.Errorf("after Commit: %q, %v (%v); want the new bytes, mode 0600", read("old.pcap"), fi.Mode(), err)
	}

	// A device, and a link to a regular file: written where they lead.
	o, err = CreateOutFile(os.DevNull, "-w")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := o.Write([]byte("x")); n != 1 || err != nil || o.Commit() != nil || o.Close() != nil {
		t.Errorf("/dev/null: %d, %v", n, err)
	}
	link := filepath.Join(dir, "link.pcap")
	if err := os.Symlink(old, link); err != nil {
		t.Fatal(err)
	}
	o, err = CreateOutFile(link, "-w")
	if err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("via"))
	o.Commit()
	o.Close()
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 || read("old.pcap") != "via" {
		t.Errorf("a link: %q, %v (%v); want the link kept and its file written", read("old.pcap"), fi.Mode(), err)
	}

	// A directory that cannot hold the file fails at once.
	if _, err := CreateOutFile(filepath.Join(dir, "no", "x.pcap"), "-w"); err == nil {
		t.Error("a missing directory was accepted")
	}
}
