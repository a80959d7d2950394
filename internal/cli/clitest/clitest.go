package clitest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RunMain is for a command's TestMain: when the environment variable env is
// set, it runs main as the command name with the arguments env holds (one a
// line), and exits with status 0 if main returns; otherwise it returns.
func RunMain(env, name string, main func()) {
	if args, ok := os.LookupEnv(env); ok {
		os.Args = []string{name}
		if args != "" {
			os.Args = append(os.Args, strings.Split(args, "\n")...)
		}
		main()
		os.Exit(0)
	}
}

// Result is what a child printed and how it ended.
type Result struct {
	Stdout, Stderr string
	Status         int // the exit status; -1 when a signal ended it
}

// Run runs the command in a child (the test binary, with env set to args,
// one a line: see RunMain) and returns what it printed and its status.
func Run(t *testing.T, env string, args ...string) Result {
	t.Helper()
	cmd := child(env, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return result(t, cmd.Run(), &stdout, &stderr)
}

// child returns the command for the test binary run as the command.
func child(env string, args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+strings.Join(args, "\n"))
	return cmd
}

// result reads how the child ended from the error Wait returned.
func result(t *testing.T, err error, stdout, stderr *bytes.Buffer) Result {
	t.Helper()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.Status = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return res
}

// Interrupt runs the command in a child (the test binary, with env set to
// args, one a line: see RunMain) whose standard input is a pipe that
// delivers data and then stays open, as a stalled capture would. Once the
// child has read all of data, it sends it one SIGINT and waits, at most 10
// seconds, for it to exit.
func Interrupt(t *testing.T, env string, args []string, data []byte) Result {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	cmd := child(env, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	written := make(chan error, 1)
	go func() {
		_, err := pw.Write(data) // more than the pipe holds: the child reads it
		written <- err
	}()
	if err := <-written; err != nil {
		cmd.Process.Kill()
		t.Fatalf("writing to the child: %v (%v)", err, <-exited)
	}
	// The child has read everything once the pipe is empty; it installed
	// its signal handler before its first read.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, ok := unread(pr)
		if !ok {
			time.Sleep(time.Second) // no way to tell: give it time
			break
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the child read only part of its input in 10 s (%d bytes left): %v", n, <-exited)
		}
	}
	time.Sleep(100 * time.Millisecond) // the frames read reach the dispatcher
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("one SIGINT did not end the child within 10 s; standard error %q", stderr.String())
	}
	return result(t, err, &stdout, &stderr)
}
