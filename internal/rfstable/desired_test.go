package rfstable

import (
	"errors"
	"sync"
	"testing"
	"unsafe"
)

func TestNewDesiredCapacity(t *testing.T) {
	for _, c := range []int{-1, 0, 3, 6, 1000, MaxDesiredCapacity * 2} {
		if d, err := NewDesired(c); !errors.Is(err, ErrCapacity) || d != nil {
			t.Errorf("NewDesired(%d) = %v, %v; want nil, ErrCapacity", c, d, err)
		}
	}
	for _, c := range []int{1, 2, 1024} {
		d, err := NewDesired(c)
		if err != nil {
			t.Fatalf("NewDesired(%d): %v", c, err)
		}
		if d.Capacity() != c {
			t.Errorf("Capacity() = %d, want %d", d.Capacity(), c)
		}
	}
}

func TestDesiredSetGetClear(t *testing.T) {
	d, err := NewDesired(256)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := d.Get(0); ok || w != -1 {
		t.Errorf("Get on empty table = %d, %v", w, ok)
	}
	for _, c := range []struct {
		flowid uint32
		worker int
	}{{0, 0}, {1, 7}, {0xffffffff, MaxWorkers - 1}, {0x12345678, 3}} {
		if err := d.Set(c.flowid, c.worker); err != nil {
			t.Fatalf("Set(%#x, %d): %v", c.flowid, c.worker, err)
		}
		if w, ok := d.Get(c.flowid); !ok || w != c.worker {
			t.Errorf("Get(%#x) = %d, %v; want %d, true", c.flowid, w, ok, c.worker)
		}
		d.Clear(c.flowid)
		if w, ok := d.Get(c.flowid); ok {
			t.Errorf("Get(%#x) after Clear = %d, true", c.flowid, w)
		}
	}
	// Overwrite with a new worker.
	_ = d.Set(42, 1)
	_ = d.Set(42, 2)
	if w, _ := d.Get(42); w != 2 {
		t.Errorf("Get after second Set = %d, want 2", w)
	}
}

func TestDesiredWorkerRange(t *testing.T) {
	d, _ := NewDesired(16)
	_ = d.Set(5, 4)
	for _, w := range []int{-1, MaxWorkers, 1 << 20} {
		if err := d.Set(5, w); !errors.Is(err, ErrWorker) {
			t.Errorf("Set(5, %d) err = %v, want ErrWorker", w, err)
		}
	}
	if w, ok := d.Get(5); !ok || w != 4 {
		t.Errorf("a rejected Set changed the slot: Get = %d, %v", w, ok)
	}
}

func TestDesiredTagMismatch(t *testing.T) {
	d, _ := NewDesired(16)
	a, b := uint32(0x00010003), uint32(0x00020003) // same slot (low 4 bits), different tag
	if a&15 != b&15 {
		t.Fatal("test flowids must share a slot")
	}
	_ = d.Set(a, 1)
	_ = d.Set(b, 2)
	if w, ok := d.Get(a); ok {
		t.Errorf("Get(a) after b overwrote the slot = %d, true; want absent", w)
	}
	if w, ok := d.Get(b); !ok || w != 2 {
		t.Errorf("Get(b) = %d, %v; want 2, true", w, ok)
	}
	// Clearing a must not erase b's record.
	d.Clear(a)
	if w, ok := d.Get(b); !ok || w != 2 {
		t.Errorf("Clear(a) erased b: Get(b) = %d, %v", w, ok)
	}
	// Flowids differing only in bits between the index and bit 16 are told
	// apart too (a 16-bit tag in the upper half would confuse them).
	_ = d.Set(0x03, 1)
	_ = d.Set(0x13, 2)
	if w, ok := d.Get(0x03); ok {
		t.Errorf("Get(0x03) after 0x13 overwrote the slot = %d, true", w)
	}
}

func TestDesiredConcurrent(t *testing.T) {
	d, _ := NewDesired(64)
	const writers, readers, iters = 4, 4, 20000
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for g := range writers {
		wg.Go(func() {
			for i := range iters {
				f := uint32(i*writers + g)
				if err := d.Set(f, int(f%1000)); err != nil {
					errs <- err
					return
				}
				if i%7 == 0 {
					d.Clear(f)
				}
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for i := range iters * writers {
				f := uint32(i)
				// Whatever is read must be f's own record: worker f%1000.
				if w, ok := d.Get(f); ok && w != int(f%1000) {
					errs <- errors.New("Get returned another flow's worker")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDesiredAllocs(t *testing.T) {
	d, _ := NewDesired(1024)
	var sink int
	allocs := testing.AllocsPerRun(1000, func() {
		for f := range uint32(64) {
			_ = d.Set(f*977, int(f))
			w, _ := d.Get(f * 977)
			sink += w
			d.Clear(f * 977)
		}
	})
	if allocs != 0 {
		t.Errorf("Desired Set/Get/Clear allocates %v per run", allocs)
	}
	_ = sink
}

// TestDesiredGen checks that Gen, never zero, moves on every change of a
// recorded worker and on nothing else.
func TestDesiredGen(t *testing.T) {
	var zero Desired
	if zero.Gen() == 0 {
		t.Error("the zero Desired's Gen is 0, which a new Entry's DesiredGen would match")
	}
	d, err := NewDesired(16)
	if err != nil {
		t.Fatal(err)
	}
	g := d.Gen()
	step := func(what string, changes bool, do func()) {
		t.Helper()
		do()
		now := d.Gen()
		if now == 0 || (now != g) != changes {
			t.Errorf("%s: Gen %d -> %d, want a change: %v", what, g, now, changes)
		}
		g = now
	}
	step("Set new", true, func() { _ = d.Set(5, 1) })
	step("Set same", false, func() { _ = d.Set(5, 1) })
	step("Set other worker", true, func() { _ = d.Set(5, 2) })
	step("Set out of range", false, func() { _ = d.Set(5, -1) })
	step("Set over another flowid's slot", true, func() { _ = d.Set(5+16, 2) })
	step("Clear of a flowid not recorded", false, func() { d.Clear(5) })
	step("Clear", true, func() { d.Clear(5 + 16) })
	step("Clear again", false, func() { d.Clear(5 + 16) })
	step("Get", false, func() { d.Get(5) })
}

// TestDesiredLayout pins the padding that keeps Gen, which writers change,
// off the line of the fields every reader loads.
func TestDesiredLayout(t *testing.T) {
	if s, o := unsafe.Sizeof(Desired{}), unsafe.Offsetof(Desired{}.gen); s != 128 || o != 64 {
		t.Errorf("Desired is %d bytes with gen at %d, want 128 and 64", s, o)
	}
}
