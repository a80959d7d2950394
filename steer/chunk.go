package steer

import (
	"math/bits"

	"github.com/rpsgo/rps/hash"
)

// fastChunk is the classifier's IPv4 fast path over a chunk of frames,
// with one batch hash for all of them: where frames are classified one at
// a time, the hash is a call per frame and the larger part of the cost.
type fastChunk struct {
	n      int
	at     [chunkLen]uint8 // which frame of the chunk each fast one is
	types  [chunkLen]hash.HashType
	tuples [chunkLen][hash.IPv4Tuple4Len]byte
	sums   [chunkLen]uint32
}

// run takes the frames of chunk that the fast path covers (untagged, with
// no hash from their source, simple IPv4: see Classifier.ipv4Tuple),
// records them and their hashes in fc, and returns a mask of the others,
// which the caller classifies one by one. A fast frame's Classification is
// ReasonOK, EtherType IPv4, keyless, with fc's hash type and sum.
func (fc *fastChunk) run(cls *Classifier, chunk []Frame) (slow uint64) {
	n := 0
	for i := range chunk {
		f := &chunk[i]
		if !f.HasVLAN && f.HashType == hash.None {
			if ht, ok := cls.ipv4Tuple(f.Data, &fc.tuples[n]); ok {
				fc.at[n], fc.types[n] = uint8(i), ht
				n++
				continue
			}
		}
		slow |= 1 << i
	}
	fc.n = n
	if cls.h == nil { // SipHash: one call per tuple, of its own length
		for k := range fc.tuples[:n] {
			fc.sums[k] = cls.sumIPv4(&fc.tuples[k], fc.types[k])
		}
		return slow
	}
	cls.h.SumIPv4Tuples(fc.sums[:n], fc.tuples[:n])
	return slow
}

// classify is steps 1 and 2: the classifier, then the source's own hash
// when it has one. Unless a trace wants the whole classification, a plain
// IPv4 packet is classified only as far as its hash (Classifier.flowOnly):
// Packet.Key derives the key if the handler asks for it.
func (p *producer) classify(f *Frame, c *Classification) {
	switch {
	case f.HasVLAN:
		p.d.cls.ClassifyVLAN(f.Data, f.VLAN, c)
	case p.tr == nil:
		p.d.cls.flowOnly(f.Data, c)
	default:
		p.d.cls.Classify(f.Data, c)
	}
	if f.HashType != hash.None { // the source (a NIC, a kernel program) hashed it
		c.FlowID, c.HashType = f.FlowID, f.HashType
		return
	}
	if c.frag != fragNone { // FragmentsFollow
		p.followFragment(f, c)
	}
}

// chunkLen is how many frames dispatch classifies before it steers them.
// fastChunk's masks hold at most 64.
const chunkLen = BatchSize

var _ [64 - chunkLen]struct{} // chunkLen <= 64

// classifyChunk is steps 1 and 2 for a chunk of frames: classify each
// (classify), with the IPv4 fast path's hashes done in one batch
// (fastChunk) unless a trace wants every frame's whole classification, and
// count them. The counts come before any frame is steered: while a full
// queue holds the input back, Stats may read them.
//
// With compact set (the plain path, queuePlain), a frame of the fast path
// gets only its result in p.res, 12 bytes where a Classification takes
// 184, and its bit in p.resFast; fast reports whether its Classification
// is left unwritten. Every frame gets its p.res.
func (p *producer) classifyChunk(chunk []Frame, compact bool) []Classification {
	cls := p.clsBuf[:len(chunk)]
	slow := ^uint64(0) >> (64 - len(chunk))
	p.frames += uint64(len(chunk))
	p.resFast = 0
	if p.tr == nil {
		fc := &p.fast
		slow = fc.run(p.d.cls, chunk)
		mask := p.d.table.mask
		for k, i := range fc.at[:fc.n] {
			sum, ht := fc.sums[k], fc.types[k]
			p.bucketFrames[sum&mask]++
			if compact {
				p.res[i] = flowResult{sum, ht, ReasonOK}
				continue
			}
			c := &cls[i]
			c.EtherType, c.Reason, c.HashType, c.keyless, c.FlowID = etherTypeIPv4, ReasonOK, ht, true, sum
		}
		if compact {
			p.resFast = ^slow & (^uint64(0) >> (64 - len(chunk)))
		}
	}
	for ; slow != 0; slow &= slow - 1 {
		i := bits.TrailingZeros64(slow)
		c := &cls[i]
		p.classify(&chunk[i], c)
		p.count(c)
		p.res[i] = flowResult{c.FlowID, c.HashType, c.Reason}
	}
	return cls
}

// flowResult is what the plain path keeps of a frame's classification.
type flowResult struct {
	flowID uint32
	hash   hash.HashType
	reason Reason
}

// classification returns frame i's Classification, written from its
// compact result if classifyChunk left it unwritten.
func (p *producer) classification(cls []Classification, i int) *Classification {
	c := &cls[i]
	if p.resFast&(1<<i) != 0 {
		r := &p.res[i]
		c.EtherType, c.Reason, c.HashType, c.keyless, c.FlowID = etherTypeIPv4, ReasonOK, r.hash, true, r.flowID
	}
	return c
}

// count counts a classified frame by reason, and in its bucket's load
// when it is hashed (Frames is counted by the caller).
func (p *producer) count(c *Classification) {
	if c.Reason != ReasonOK {
		p.reasons[c.Reason]++
	}
	if c.HashType.IsHash() {
		p.bucketFrames[c.FlowID&p.d.table.mask]++
	}
}
