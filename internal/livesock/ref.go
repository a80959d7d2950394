package livesock

import "sync/atomic"

// TryRef adds a reference to the count n unless it has dropped to zero
// (what it counts is gone), and reports whether it did.
func TryRef(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v+1) {
			return true
		}
	}
}
