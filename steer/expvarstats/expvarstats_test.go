package expvarstats

import (
	"context"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// newDispatcher returns a dispatcher with the given number of workers,
// closed when the test ends.
func newDispatcher(t *testing.T, workers int) *steer.Dispatcher {
	t.Helper()
	d, err := steer.New(steer.Config{Workers: workers}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

var nameSeq atomic.Int64

// testName returns a name no test has published: expvar keeps names for
// the life of the process, which -count runs tests in again.
func testName(t *testing.T) string {
	return fmt.Sprintf("expvarstats_%s_%d", t.Name(), nameSeq.Add(1))
}

// published is the part of the published JSON the tests look at.
type published struct {
	Frames      uint64
	Workstreams []struct{ Worker int }
}

// read decodes the variable name through expvar; ok is false when it
// reads as null.
func read(t *testing.T, name string) (s published, ok bool) {
	t.Helper()
	v := expvar.Get(name)
	if v == nil {
		t.Fatalf("expvar %q is not published", name)
	}
	text := v.String()
	if text == "null" {
		return s, false
	}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		t.Fatalf("expvar %q: %v in %.200s", name, err, text)
	}
	return s, true
}

// frames returns n frames of one UDP/IPv4 flow.
func frames(n int) []steer.Frame {
	b := make([]byte, 14+20+8)
	b[12], b[13] = 0x08, 0x00 // IPv4
	ip := b[14:]
	ip[0], ip[3], ip[8], ip[9] = 0x45, 28, 64, 17
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	fs := make([]steer.Frame, n)
	for i := range fs {
		fs[i] = steer.Frame{Data: b, WireLen: len(b)}
	}
	return fs
}

func TestPublish(t *testing.T) {
	name := testName(t)
	d := newDispatcher(t, 1)
	unpublish, err := Publish(name, d)
	if err != nil {
		t.Fatal(err)
	}
	defer unpublish()
	s, ok := read(t, name)
	if !ok || s.Frames != 0 || len(s.Workstreams) != 1 {
		t.Fatalf("before traffic: %+v (published %v), want 0 frames and 1 workstream", s, ok)
	}
	if err := d.Run(context.Background(), &steer.SliceSource{Frames: frames(100)}); err != nil {
		t.Fatal(err)
	}
	if s, _ := read(t, name); s.Frames != 100 {
		t.Errorf("after 100 frames: the variable says %d", s.Frames)
	}
	// A closed dispatcher's final counts stay readable until unpublish.
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, ok := read(t, name); !ok || s.Frames != 100 {
		t.Errorf("after Close: %+v (published %v), want 100 frames", s, ok)
	}
	unpublish()
	if _, ok := read(t, name); ok {
		t.Error("after unpublish: the variable is not null")
	}
}

// TestNameHeld follows a name from one dispatcher to the next: taken while
// the first holds it (closed or not), free after its unpublish, and an
// old unpublish does not release the new holder's name.
func TestNameHeld(t *testing.T) {
	name := testName(t)
	a, b := newDispatcher(t, 1), newDispatcher(t, 2)
	unpublishA, err := Publish(name, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*steer.Dispatcher{b, a} {
		_, err := Publish(name, d)
		if !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), "unpublish") {
			t.Errorf("publishing a held name: %v, want ErrNameInUse saying to unpublish", err)
		}
	}
	a.Close(context.Background())
	if _, err := Publish(name, b); !errors.Is(err, ErrNameInUse) {
		t.Errorf("publishing a name held by a closed dispatcher: %v, want ErrNameInUse", err)
	}
	if s, _ := read(t, name); len(s.Workstreams) != 1 {
		t.Errorf("the variable shows %d workstreams, want a's 1", len(s.Workstreams))
	}
	unpublishA()
	unpublishB, err := Publish(name, b)
	if err != nil {
		t.Fatalf("publishing a released name: %v", err)
	}
	defer unpublishB()
	unpublishA() // a second call releases nothing: the name is b's now
	if s, ok := read(t, name); !ok || len(s.Workstreams) != 2 {
		t.Errorf("the variable shows %+v (published %v), want b's 2 workstreams", s, ok)
	}
	if _, err := Publish(name, a); !errors.Is(err, ErrNameInUse) {
		t.Errorf("after a stale unpublish: %v, want ErrNameInUse", err)
	}
}

func TestNameTaken(t *testing.T) {
	other := testName(t)
	expvar.NewInt(other)
	d := newDispatcher(t, 1)
	for _, name := range []string{other, "memstats", "cmdline"} {
		_, err := Publish(name, d)
		if !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), "another package") {
			t.Errorf("publishing %q: %v, want ErrNameInUse naming another package", name, err)
		}
	}
	if v := expvar.Get(other); v.String() != "0" {
		t.Errorf("the other package's variable reads %s", v)
	}
}

func TestBadArguments(t *testing.T) {
	d := newDispatcher(t, 1)
	if _, err := Publish("", d); err == nil {
		t.Error("an empty name was accepted")
	}
	name := testName(t)
	if _, err := Publish(name, nil); err == nil {
		t.Error("a nil dispatcher was accepted")
	}
	if expvar.Get(name) != nil {
		t.Error("a failed Publish published its name")
	}
}

// TestEncodeError checks that stats that cannot be encoded still give
// valid JSON, which says why.
func TestEncodeError(t *testing.T) {
	var got struct{ Error string }
	b := encode(func() {})
	if err := json.Unmarshal(b, &got); err != nil || !strings.Contains(got.Error, "expvarstats: encoding the stats") {
		t.Errorf("encode of a func: %s (%v)", b, err)
	}
}

// TestConcurrent serves /debug/vars while dispatchers take and release a
// name: every response is valid JSON (run it with -race).
func TestConcurrent(t *testing.T) {
	name := testName(t)
	ds := []*steer.Dispatcher{newDispatcher(t, 1), newDispatcher(t, 2)}
	unpublish, err := Publish(name, ds[0])
	if err != nil {
		t.Fatal(err)
	}
	unpublish()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			unpublish, err := Publish(name, ds[i%2])
			if err != nil {
				t.Error(err)
				return
			}
			unpublish()
		}
	})
	for range 50 {
		rec := httptest.NewRecorder()
		expvar.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/vars", nil))
		var vars map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &vars); err != nil {
			t.Fatalf("/debug/vars: %v", err)
		}
		if _, ok := vars[name]; !ok {
			t.Fatalf("/debug/vars has no %q", name)
		}
	}
	close(stop)
	wg.Wait()
}
