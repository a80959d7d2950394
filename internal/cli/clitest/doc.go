// Package clitest runs a command's main in a child process, for tests of
// what only a process shows: its exit status and what it prints. The
// command's test binary is the child: its TestMain calls RunMain first, and
// a test starts it with Run.
package clitest
