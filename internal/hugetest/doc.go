// Package hugetest is what the tests of the packages that ask for
// transparent huge pages (flowtable, internal/rfstable) share: reading how
// much of a range of memory huge pages back. Tests only.
package hugetest
