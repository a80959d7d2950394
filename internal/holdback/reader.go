package holdback

import (
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/steer"
)

// Reader is one worker's side of the protocol. A source's ReadBatch
// calls BeforeRead before it reads its socket, Hold when that says a hold
// is on, and AfterRead after the read, from the worker's goroutine only:
//
//	func (s *steered) ReadBatch(ctx context.Context, b *steer.Batch) error {
//		wait := s.pollTimeout
//		if s.r.BeforeRead() {
//			var held bool
//			if wait, held = s.r.Hold(b, wait); held {
//				return nil // b holds the frames held back, in arrival order
//			}
//		}
//		err := s.read(ctx, b, wait)
//		s.r.AfterRead(b, s.consumed)
//		return err
//	}
//
// BeforeRead and AfterRead inline: without a hold, the reader's cost is
// one atomic store and two atomic loads per batch.
//
// A hold is the reader's to lift, except when the reader does not come
// back for twice HoldTimeout: then SetTable takes it off (Holder.abandon).
// The frames held back stay the reader's alone, so the reader hands them
// out itself, at its next read, whether its hold is still on, lifted by
// SetTable, or replaced by the next change's.
type Reader struct {
	h *Holder

	// pos is where the reader stood in its ring after its last read, set
	// by the reader alone; done publishes it when the reader comes back
	// for more, by which time every frame before was dispatched (DIRECT:
	// handled) or held.
	pos  uint32
	done atomic.Uint32

	holds     atomic.Pointer[holdSet] // nil, or the hold on until lifted
	cls       steer.Classification
	held      []steer.Frame
	heldOffs  []int
	heldBuf   []byte
	heldBytes int
}

// BeforeRead publishes that every frame read before was handled, and
// reports whether a hold is on or frames are held back (after SetTable
// lifted a hold the reader did not come back for): then the caller calls
// Hold before it reads.
func (r *Reader) BeforeRead() bool {
	r.done.Store(r.pos)
	return r.holds.Load() != nil || r.held != nil
}

// Hold lifts the hold if its old workers have drained, and returns how
// long the read may wait for frames: wait, or less while the hold stays on
// (so that the reader notices soon that it can be lifted). When held is
// true, b holds the frames the lifted hold kept back, in arrival order, as
// private copies (b.Release nil): the caller returns b as its batch
// without reading.
func (r *Reader) Hold(b *steer.Batch, wait time.Duration) (time.Duration, bool) {
	hs := r.holds.Load()
	if hs == nil {
		if r.held != nil {
			// SetTable lifted the hold while the reader was away: the
			// frames it held back go first.
			r.deliverHeld(b)
			return wait, true
		}
		return wait, false
	}
	if hs.delivered {
		// The held frames handed out last time are handled now: only now
		// may the next table change start (and count them as done).
		r.lift(hs)
		return wait, false
	}
	if r.liftable(hs) {
		if len(r.held) > 0 {
			hs.delivered = true
			r.deliverHeld(b)
			return wait, true
		}
		r.lift(hs)
		return wait, false
	}
	if wait < 0 || wait > holdPoll {
		wait = holdPoll
	}
	return wait, false
}

// lift ends hs. The next SetTable may store its holds once hs.lifted is
// closed, so the reader lets go of hs first; if SetTable already lifted
// hs, the reader's hold is nil or the next change's, which it keeps.
func (r *Reader) lift(hs *holdSet) {
	r.holds.CompareAndSwap(hs, nil)
	hs.finish()
}

// AfterRead takes the frames of held buckets out of b, the batch just
// read, and records pos, the reader's position in its ring after the
// read: how many frames it has taken from the ring (modulo 2^32), in the
// units of Kernel.Position, counting those the source itself dropped.
func (r *Reader) AfterRead(b *steer.Batch, pos uint32) {
	r.pos = pos
	if r.holds.Load() != nil {
		r.filter(b)
	}
}

// liftable reports whether every old worker hs waits on has handled what
// its ring held at the switch, or the hold ran out of time or room; the
// latter it counts, unless SetTable lifted hs first (and counted it).
func (r *Reader) liftable(hs *holdSet) bool {
	if !hs.armed.Load() {
		return false
	}
	h := r.h
	if time.Since(hs.start) > h.opts.HoldTimeout {
		if hs.decided.CompareAndSwap(false, true) {
			h.holdTimeouts.Add(1)
		}
		return true
	}
	if r.heldBytes > h.opts.MaxHeld {
		if hs.decided.CompareAndSwap(false, true) {
			h.holdOverflows.Add(1)
		}
		return true
	}
	if hs.blind {
		return false
	}
	for o, w := range hs.waitOn {
		if w && int32(h.readers[o].done.Load()-hs.targets[o]) < 0 {
			return false
		}
	}
	hs.decided.Store(true)
	return true
}

// filter copies the frames of held buckets aside and keeps the others in
// b. SetTable may have lifted the hold since AfterRead saw it: then b is
// left as it is.
func (r *Reader) filter(b *steer.Batch) {
	hs := r.holds.Load()
	if hs == nil {
		return
	}
	cls := r.h.cls
	c := &r.cls
	keep := b.Frames[:0]
	for i := range b.Frames {
		f := b.Frames[i]
		if f.HasVLAN {
			cls.ClassifyVLAN(f.Data, f.VLAN, c)
		} else {
			cls.Classify(f.Data, c)
		}
		if c.HashType.IsHash() && hs.buckets[c.FlowID&r.h.mask] {
			r.heldOffs = append(r.heldOffs, len(r.heldBuf))
			r.heldBuf = append(r.heldBuf, f.Data...)
			r.heldBytes += len(f.Data)
			f.Data = nil
			r.held = append(r.held, f)
			r.h.heldFrames.Add(1)
			continue
		}
		keep = append(keep, f)
	}
	b.Frames = keep
}

// deliverHeld puts the held frames, in arrival order, in b. Their bytes
// are a private copy, left to the garbage collector once handled.
func (r *Reader) deliverHeld(b *steer.Batch) {
	for i := range r.held {
		lo, hi := r.heldOffs[i], len(r.heldBuf)
		if i+1 < len(r.heldOffs) {
			hi = r.heldOffs[i+1]
		}
		r.held[i].Data = r.heldBuf[lo:hi:hi]
	}
	b.Frames = append(b.Frames[:0], r.held...)
	b.Release = nil
	r.held, r.heldOffs, r.heldBuf, r.heldBytes = nil, nil, nil, 0
}
