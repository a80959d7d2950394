package clitest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
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
