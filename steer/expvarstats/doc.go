// Package expvarstats publishes a [steer.Dispatcher]'s statistics through
// the standard library's expvar package, and so as JSON under /debug/vars
// on http.DefaultServeMux. It is a package of its own because importing
// expvar registers that handler: package steer imports no net/http, and
// only a program that imports expvarstats gets /debug/vars.
//
// # Publishing
//
//	d, err := steer.New(cfg, handler)
//	if err != nil { ... }
//	unpublish, err := expvarstats.Publish("steer", d)
//	if err != nil { ... }
//	defer unpublish()
//
// The variable's value is d.Stats() encoded as JSON, taken afresh each time
// the variable is read (a request to /debug/vars, expvar.Get("steer").String()).
// After d is closed it still reads as d's final counts, which are exact
// then, until unpublish is called.
//
// # Names
//
// expvar panics when a name is published twice and cannot take a name
// back. This package therefore publishes each name once per process, as an
// [expvar.Func] that reads whichever dispatcher holds the name now, and
// Publish checks the name instead of panicking:
//
//   - A name published by anything else (another package, or expvar's own
//     "cmdline" and "memstats") is an error wrapping [ErrNameInUse]: choose
//     another name.
//   - A name a dispatcher holds is an error wrapping ErrNameInUse, until
//     the unpublish function its Publish returned is called.
//   - After unpublish the variable reads as JSON null, and the next Publish
//     of the name gives it to a new dispatcher: a program that replaces its
//     dispatcher (a configuration reload, one test after another) keeps its
//     variable name.
//
// The caller says when a name is free, rather than this package noticing
// that the dispatcher closed: steer tells nobody when a dispatcher closes,
// and a closed dispatcher's counts are worth reading for as long as the
// caller keeps them published. Unpublish also lets the dispatcher be
// garbage collected: until then the variable refers to it.
package expvarstats
