package livetest

import (
	"runtime"
	"testing"
	"time"
)

// GoroutinesBack waits up to 5s for the process to run no more goroutines
// than before (runtime.NumGoroutine, read by the caller before it started
// anything): a leak check for what a test closed. It fails t with every
// goroutine's stack if they do not end.
func GoroutinesBack(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
