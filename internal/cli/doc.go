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
//
// A command builds its flags with NewFlagSet, parses them with Parse, does
// its work in a function that returns an error, and ends with Exit.
package cli
