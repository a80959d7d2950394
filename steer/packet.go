package steer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rpsgo/rps/hash"
)

// Packet is what a handler gets: the frame, its flowid, hash type and
// reason, and its key ([Packet.Key]). The Packet and its Data are valid
// until the handler returns, in the handler's goroutine; to keep the bytes,
// copy them or call [Packet.Retain].
type Packet struct {
	Data      []byte        // the frame from its Ethernet header
	Timestamp time.Time     // capture time, from the source
	WireLen   int           // length on the wire (>= len(Data))
	IfIndex   int           // ingress interface index
	InputID   int           // the id of the input that dispatched it (Input.ID)
	FlowID    uint32        // m_pkthdr.flowid: the Toeplitz hash, or the source's
	HashType  hash.HashType // M_HASHTYPE_* of FlowID
	Reason    Reason        // why classification stopped short, or ReasonOK
	vlan      uint16        // the tag the source delivered out of band, if hasVLAN
	Worker    int           // the workstream handling the frame
	ref       *batchRef
	prod      *producer // where a re-dispatch from the handler goes, and whose goroutine runs the handler
	frame     *byte     // Data as dispatched (its first byte), which Key reads whatever the handler does to Data
	frameLen  int32
	depth     uint8 // re-dispatch depth
	hasVLAN   bool
	keyed     bool     // prod.keyVal is this packet's key, if prod.keyPkt is this packet
	Checksum  Checksum // the source's, or with Config.VerifyChecksums the verdict
}

// maxPacketSize bounds the size of a Packet, which a producer writes for
// every frame it queues: at most two cache lines. The flow key is not in
// it; Packet.Key derives the key when a handler asks for it.
const maxPacketSize = 128

var _ [maxPacketSize - unsafe.Sizeof(Packet{})]struct{}

// Key returns the frame's flow key. The key is derived when a handler asks
// for it, in the handler's goroutine, as RPS does, from the frame as
// dispatched, whatever the handler has done to Data since, and the same
// key on every call. A Packet built by hand has the zero key.
func (p *Packet) Key() (k FlowKey) {
	pr := p.prod
	if pr == nil {
		return
	}
	if p.keyed && pr.keyPkt == p {
		return pr.keyVal
	}
	frame := unsafe.Slice(p.frame, p.frameLen)
	if ip := simpleIPv4Of(frame); !p.hasVLAN && ip != nil && pr.d.keyCls.notTunnel4(ip) {
		// Most traffic: written where the caller takes the result, and
		// kept, for a later call, by writing it twice. A key kept and
		// then copied out would be read back at once, by the copy's wide
		// loads, from the narrow stores that wrote it, which the CPU
		// cannot forward: that stall took twice as long as the derivation
		// (BenchmarkPacketKey).
		keyIPv4(&k, ip)
		pr.keyVal = FlowKey{}
		keyIPv4(&pr.keyVal, ip)
		pr.keyPkt, p.keyed = p, true
		return
	}
	pr.deriveKey(p, frame)
	return pr.keyVal
}

// deriveKey derives p's key into keyVal, where Key finds it again.
func (pr *producer) deriveKey(p *Packet, frame []byte) {
	var c Classification
	if p.hasVLAN {
		pr.d.keyCls.ClassifyVLAN(frame, p.vlan, &c)
	} else {
		pr.d.keyCls.Classify(frame, &c)
	}
	pr.keyPkt, pr.keyVal, p.keyed = p, c.Key, true
}

// String summarises the packet in one line.
func (p *Packet) String() string {
	k := p.Key()
	if !k.Src.IsValid() {
		return fmt.Sprintf("len %d non-IP reason=%s", p.WireLen, p.Reason)
	}
	return fmt.Sprintf("%s:%d > %s:%d proto %d len %d flowid 0x%08x %s reason=%s",
		k.Src, k.SrcPort, k.Dst, k.DstPort, k.Proto, p.WireLen, p.FlowID, p.HashType, p.Reason)
}

// Ref keeps a frame's buffer alive; release it exactly once.
type Ref struct{ r *batchRef }

// Retain keeps p.Data's buffer valid until the Ref is released.
func (p *Packet) Retain() Ref {
	if p.ref != nil {
		p.ref.n.Add(1)
	}
	return Ref{p.ref}
}

// Release gives the buffer back; the zero Ref does nothing.
func (r Ref) Release() {
	if r.r != nil {
		r.r.done(1)
	}
}

// batchRef counts the frames of one source batch still in flight; the
// source's release callback runs when it reaches zero.
type batchRef struct {
	n       atomic.Int32
	release func()
	d       *Dispatcher // whose callback rule release runs under
}

var refPool = sync.Pool{New: func() any { return new(batchRef) }}

// newBatchRef returns the reference count of a source batch of n frames
// whose buffer release gives back, or nil when there is nothing to give
// back. It holds one count more than the frames until dispatch is done.
func newBatchRef(d *Dispatcher, release func(), n int) *batchRef {
	if release == nil {
		return nil
	}
	r := refPool.Get().(*batchRef)
	r.release, r.d = release, d
	r.n.Store(int32(n) + 1)
	return r
}

func (r *batchRef) done(k int32) {
	if r.n.Add(-k) == 0 {
		rel, d := r.release, r.d
		r.release, r.d = nil, nil
		refPool.Put(r)
		d.release(rel)
	}
}

// maxRedispatchDepth bounds how many times a frame's descendants may be
// re-dispatched (a tunnel inside a tunnel ...); deeper ones are dropped.
const maxRedispatchDepth = 8

// ErrRedispatchDepth is returned by Redispatch nested more than 8 deep.
var ErrRedispatchDepth = errors.New("steer: re-dispatch nested too deep")

// Redispatch steers another frame from the handler, such as a tunnel's
// inner frame; data may alias p.Data. It never waits: the frame is queued,
// handled inline or dropped (QueueDrops; past 8 levels ErrRedispatchDepth).
func (p *Packet) Redispatch(data []byte) error {
	if p.prod == nil {
		return errors.New("steer: Redispatch outside a handler")
	}
	ws := p.prod.d.workers
	if p.Worker < 0 || p.Worker >= len(ws) {
		return fmt.Errorf("steer: Redispatch: the handler changed Packet.Worker to %d", p.Worker)
	}
	if p.ref != nil {
		p.ref.n.Add(1)
	}
	f := Frame{Data: data, Timestamp: p.Timestamp, IfIndex: p.IfIndex}
	return p.prod.redispatch(&f, p.ref, p.depth+1, ws[p.Worker], p.InputID)
}
