package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestOpenRegularFile: a regular file is read as it is, and Close closes it.
func TestOpenRegularFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("capture"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a regular file does not go by ctx
	r, err := Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || string(b) != "capture" {
		t.Errorf("read %q, %v", b, err)
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestOpenStalledPipe: a read of a pipe that delivers nothing more ends when
// ctx does, after what the pipe delivered.
func TestOpenStalledPipe(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	if _, err := pw.WriteString("header"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Open(ctx, "/dev/fd/"+strconv.Itoa(int(pr.Fd())))
	if err != nil {
		t.Skipf("no /dev/fd: %v", err)
	}
	defer r.Close()
	buf := make([]byte, 16)
	if n, err := io.ReadAtLeast(r, buf, 6); err != nil || string(buf[:n]) != "header" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(buf)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read of a stalled pipe did not end with its context")
	}
}

// TestCtxReaderStream: every byte of a stream longer than the two buffers
// comes out once, in order, whatever the sizes of the reads on either side.
func TestCtxReaderStream(t *testing.T) {
	want := make([]byte, 5*ctxReaderChunk+123)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	pr, pw := io.Pipe()
	go func() {
		for b := want; len(b) > 0; {
			n := min(len(b), 1+rng.IntN(3*ctxReaderChunk/2))
			pw.Write(b[:n])
			b = b[n:]
		}
		pw.Close()
	}()
	r := newCtxReader(context.Background(), pr, pr.Close)
	var got []byte
	buf := make([]byte, 3*ctxReaderChunk)
	for i := 0; ; i++ {
		n, err := r.Read(buf[:1+i*7919%len(buf)])
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read %d bytes, want the %d written, in order", len(got), len(want))
	}
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("after the end: %d, %v; want 0, EOF", n, err)
	}
}

// TestNotifyContext runs NotifyContext in a child process: the first SIGINT
// ends the context and the program goes on; the second one ends it at once.
func TestNotifyContext(t *testing.T) {
	if os.Getenv("CLI_NOTIFY") == "1" {
		ctx, stop := NotifyContext(context.Background())
		defer stop()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Stdout.WriteString("stopped\n")
		time.Sleep(30 * time.Second)
		os.Exit(0)
	}
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNotifyContext$")
	cmd.Env = append(os.Environ(), "CLI_NOTIFY=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	for _, want := range []string{"ready", "stopped"} {
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child printed %q, want %q", lines.Text(), want)
		}
		if want == "ready" {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("after the second SIGINT: %v, want the child killed", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && (!ws.Signaled() || ws.Signal() != syscall.SIGINT) {
		t.Errorf("child ended with %v, want killed by SIGINT", exit)
	}
}

// stallAfter returns data once, then blocks until release is closed; blocked
// is closed when it starts blocking.
type stallAfter struct {
	data             []byte
	blocked, release chan struct{}
}

func (s *stallAfter) Read(p []byte) (int, error) {
	if len(s.data) > 0 {
		n := copy(p, s.data)
		s.data = s.data[n:]
		return n, nil
	}
	close(s.blocked)
	<-s.release
	return 0, io.EOF
}

// TestCtxReaderKeepsWhatItRead: what the reader read ahead before ctx ended
// is returned before ctx's error, so that an interrupted command counts
// every byte it read.
func TestCtxReaderKeepsWhatItRead(t *testing.T) {
	src := &stallAfter{data: []byte("records"), blocked: make(chan struct{}), release: make(chan struct{})}
	defer close(src.release)
	ctx, cancel := context.WithCancel(context.Background())
	r := newCtxReader(ctx, src, func() error { return nil })
	<-src.blocked // "records" is read ahead
	cancel()
	buf := make([]byte, 16)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "records" {
		t.Errorf("first read after cancel: %q, %v; want what was read ahead", buf[:n], err)
	}
	if n, err := r.Read(buf); n != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("second read after cancel: %d, %v; want context.Canceled", n, err)
	}
}
