package expvarstats

import (
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"sync"

	"github.com/rpsgo/rps/steer"
)

// ErrNameInUse is wrapped by Publish's error for a name that is taken:
// published by something other than this package, or held by a dispatcher
// whose unpublish has not been called.
var ErrNameInUse = errors.New("expvar name in use")

// Every name this package has published, and the publication that holds
// it now (nil: none; the variable reads as null).
var (
	mu     sync.Mutex
	owners = map[string]*publication{}
)

// publication is one successful Publish: its unpublish releases the name
// only while the name is still its own.
type publication struct{ d *steer.Dispatcher }

// Publish publishes d.Stats() as JSON under the expvar name. It returns an
// error wrapping [ErrNameInUse] when the name is taken (see the package
// documentation), and an error when name is empty or d is nil. The
// returned unpublish releases the name, which then reads as null until it
// is published again; it may be called more than once, from any
// goroutine, before or after d is closed.
func Publish(name string, d *steer.Dispatcher) (unpublish func(), err error) {
	if name == "" {
		return nil, errors.New("expvarstats: the expvar name is empty")
	}
	if d == nil {
		return nil, fmt.Errorf("expvarstats: publishing %q: the dispatcher is nil", name)
	}
	mu.Lock()
	defer mu.Unlock()
	owner, ours := owners[name]
	switch {
	case !ours && expvar.Get(name) != nil:
		return nil, fmt.Errorf("expvarstats: expvar name %q is published by another package; choose another name: %w",
			name, ErrNameInUse)
	case owner != nil:
		return nil, fmt.Errorf("expvarstats: expvar name %q is held by a dispatcher published earlier; call the "+
			"unpublish function that Publish returned, or choose another name: %w", name, ErrNameInUse)
	case !ours:
		expvar.Publish(name, expvar.Func(func() any { return current(name) }))
	}
	p := &publication{d: d}
	owners[name] = p
	return func() {
		mu.Lock()
		if owners[name] == p {
			owners[name] = nil
		}
		mu.Unlock()
	}, nil
}

// current is the value of the variable name: the JSON of its dispatcher's
// stats, or nil (null) when no dispatcher holds it.
func current(name string) any {
	mu.Lock()
	p := owners[name]
	mu.Unlock()
	if p == nil {
		return nil
	}
	return encode(p.d.Stats())
}

// encode returns v as JSON, or, should v not encode, a JSON object whose
// "error" says why: expvar would otherwise write nothing for the variable,
// and /debug/vars would no longer be valid JSON.
func encode(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": "expvarstats: encoding the stats: " + err.Error()})
	}
	return b
}
