// Package cli holds the command-line conventions that every command in the
// repository (examples/* and bench) follows, so that they behave alike:
//
//   - -h (or -help) prints the usage on standard error and exits with
//     status 0, running nothing.
//   - A usage error (an unknown flag, a bad flag value, a stray argument,
//     a value the command passes on and a library rejects: see UsageError)
//     prints "name: message" and a pointer to -h on standard error and
//     exits with status 2, as package flag does.
//   - Any other error prints "name: message" on standard error and exits
//     with status 1. Messages carry the program's name once, added here,
//     and no log timestamps.
//   - What a command produces (its tables, its report, a CSV) goes to
//     standard output; progress, status lines and diagnostics go to
//     standard error. When a command is asked to write machine-readable data
//     to standard output (a "-" file name), its human-readable report moves
//     to standard error, so that standard output stays parseable.
//   - A command that reads its input to the end (a capture file, a pipe)
//     stops reading at the first SIGINT (Ctrl-C) or SIGTERM
//     (NotifyContext), even from a pipe that delivers nothing (Open),
//     prints what it has for the input read until then, and exits with
//     status 1, its error saying it was interrupted (ErrInterrupted); a
//     second signal ends it at once. A command that runs until it is
//     stopped (a live capture, a forwarder) ends on the first signal as it
//     normally does.
//   - When its input fails midway (a truncated capture file), a command
//     prints what it has for the input read before the failure, then the
//     error, and exits with status 1.
//
// A command builds its flags with NewFlagSet, parses them with Parse, does
// its work in a function that returns an error, and ends with Exit.
package cli
