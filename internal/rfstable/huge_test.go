package rfstable

import (
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestHugeSlice checks hugeSlice's result below and above the huge-page
// threshold: the length asked for, all zero, every element writable, and
// on Linux a large one starting on a huge-page boundary.
func TestHugeSlice(t *testing.T) {
	for _, n := range []int{1, 1000, 1 << 19, 1<<20 + 3} {
		s := hugeSlice[atomic.Uint64](n)
		if len(s) != n {
			t.Fatalf("hugeSlice(%d) has length %d", n, len(s))
		}
		for i := range s {
			if s[i].Load() != 0 {
				t.Fatalf("hugeSlice(%d)[%d] = %d, want 0", n, i, s[i].Load())
			}
			s[i].Store(uint64(i) + 1)
		}
		for i := range s {
			if s[i].Load() != uint64(i)+1 {
				t.Fatalf("hugeSlice(%d)[%d] lost its value", n, i)
			}
		}
		large := n*8 >= 4<<20
		if addr := uintptr(unsafe.Pointer(&s[0])); large && runtime.GOOS == "linux" && addr%(2<<20) != 0 {
			t.Errorf("hugeSlice(%d) starts at %#x, not on a 2 MiB boundary", n, addr)
		}
	}
	sets := hugeSlice[set](1 << 14) // 9 MiB
	sets[len(sets)-1].tags[Ways-1] = 1
	if sets[0].valid != 0 || sets[len(sets)-1].tags[Ways-1] != 1 {
		t.Error("hugeSlice of sets is not usable")
	}
}

// TestHugeSliceTypesHoldNoPointers: hugeSlice's memory is a []byte, which
// the garbage collector never scans, so a pointer stored in it would not
// keep its target alive. The types the package allocates with it must stay
// pointer-free (an Entry that grows a pointer field fails here).
func TestHugeSliceTypesHoldNoPointers(t *testing.T) {
	for _, v := range []any{set{}, atomic.Uint64{}} {
		if typ := reflect.TypeOf(v); hasPointers(typ) {
			t.Errorf("%v holds pointers; hugeSlice must not allocate it", typ)
		}
	}
	if !hasPointers(reflect.TypeOf(struct {
		A int
		P *int
	}{})) {
		t.Error("hasPointers misses a pointer field")
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.Map, reflect.Chan,
		reflect.Func, reflect.Interface, reflect.String:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
