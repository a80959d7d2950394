package gopacketsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/google/gopacket"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// ErrClosed is returned by ReadBatch after Close.
var ErrClosed = errors.New("gopacketsrc: source closed")

const (
	// DefaultBatchSize is the number of frames per batch unless
	// [WithBatchSize] says otherwise.
	DefaultBatchSize = steer.BatchSize
	// MaxBatchSize is the largest batch size [WithBatchSize] accepts.
	MaxBatchSize = 1024
	// MaxPacketLen is the most bytes of one packet the adapter keeps
	// (tcpdump's largest snap length, as pcapfile's MaxRecordLen). A
	// longer packet is cut to it, keeps its wire length in Frame.WireLen and
	// is counted in [Stats].Oversize.
	MaxPacketLen = pcapfile.MaxRecordLen

	arenaPerFrame = 2048
	minArenaSize  = 64 << 10
	// maxFreeArenas bounds the arenas kept for reuse, as many as the
	// batches a dispatcher's queues hold at once in practice.
	maxFreeArenas = 256
)

// Option configures a [Source].
type Option func(*config) error

type config struct {
	batchSize int
	ifIndex   int
	live      bool
	isTimeout func(error) bool
	stats     func() (steer.SourceStats, error)
}

// WithBatchSize sets the largest number of frames per batch, between 1 and
// [MaxBatchSize] ([DefaultBatchSize] by default).
func WithBatchSize(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxBatchSize {
			return fmt.Errorf("gopacketsrc: batch size %d is outside 1..%d", n, MaxBatchSize)
		}
		c.batchSize = n
		return nil
	}
}

// WithIfIndex sets the ingress interface index (Frame.IfIndex) of every
// frame, overriding CaptureInfo.InterfaceIndex. It must be positive.
func WithIfIndex(i int) Option {
	return func(c *config) error {
		if i < 1 {
			return fmt.Errorf("gopacketsrc: interface index %d is not positive", i)
		}
		c.ifIndex = i
		return nil
	}
}

// WithLive says the packet source is a live capture (a pcap handle on a
// device, an AF_PACKET or PF_RING ring), which the kernel fills whether or
// not it is read: the Source then implements [steer.LiveSource] as live,
// and under [steer.OverflowAuto] a full worker queue drops instead of
// holding the reader back. Without it the source is taken to be one that
// can wait, such as a file.
func WithLive() Option {
	return func(c *config) error {
		c.live = true
		return nil
	}
}

// WithTimeoutError replaces the test for the errors by which the packet
// source says its read timeout expired with no packet (see the package
// documentation for the ones recognised by default). Such an error ends the
// batch without being returned, so that the caller regains control to check
// its context.
func WithTimeoutError(isTimeout func(err error) bool) Option {
	return func(c *config) error {
		if isTimeout == nil {
			return errors.New("gopacketsrc: nil timeout test")
		}
		c.isTimeout = isTimeout
		return nil
	}
}

// WithSourceStats gives the Source the packet source's own counters (such
// as a pcap handle's Stats or an AF_PACKET socket's statistics), which
// Source.SourceStats then returns for the dispatcher's [steer.Stats].
func WithSourceStats(stats func() (steer.SourceStats, error)) Option {
	return func(c *config) error {
		if stats == nil {
			return errors.New("gopacketsrc: nil source stats function")
		}
		c.stats = stats
		return nil
	}
}

// Stats counts what a [Source] has read.
type Stats struct {
	Packets  uint64 // packets delivered as frames
	Bytes    uint64 // captured bytes of those packets (after a cut to MaxPacketLen)
	Batches  uint64 // batches delivered
	Timeouts uint64 // reads that ended on the packet source's read timeout
	Oversize uint64 // packets longer than MaxPacketLen, cut to it
	BadVLAN  uint64 // AncillaryVLAN values outside 0..4095, ignored
	Runts    uint64 // packets too short for their link-layer header (delivered with empty Data)
}

// Source is a [steer.Source] over a gopacket packet data source. ReadBatch
// must not be called from several goroutines at once; Close, Stats and a
// batch's Release may be called from any goroutine.
type Source struct {
	cfg  config
	link pcapfile.LinkType
	src  gopacket.ZeroCopyPacketDataSource // a plain source behind copying

	closed atomic.Bool
	eof    bool  // the packet source said io.EOF: it is not read again
	err    error // an error met inside the last batch, returned by the next call
	npkt   uint64

	// A packet read while the last batch's arena was too full for it,
	// copied out of the packet source's buffer (which the next read may
	// overwrite) to start the next batch.
	pending bool
	pendF   steer.Frame
	spill   []byte

	headroom  int // bytes left free before each packet for its Ethernet header
	free      chan *arena
	arenaSize int
	vlan      vlanDecoder

	stats struct {
		packets, bytes, batches, timeouts, oversize, badVLAN, runts atomic.Uint64
	}
}

// New returns a Source reading src, whose packets start with a link-layer
// header of type link. When src also implements
// [gopacket.ZeroCopyPacketDataSource] (a pcap or PF_RING handle,
// gopacket's afpacket TPacket, a pcapgo reader all do), the Source reads it
// with ZeroCopyReadPacketData, which spares the packet source an allocation
// per packet. Close does not close src.
func New(src gopacket.PacketDataSource, link pcapfile.LinkType, opt ...Option) (*Source, error) {
	if src == nil {
		return nil, errors.New("gopacketsrc: nil packet data source")
	}
	if zc, ok := src.(gopacket.ZeroCopyPacketDataSource); ok {
		return newSource(zc, link, opt)
	}
	return newSource(copying{src}, link, opt)
}

// NewZeroCopy returns a Source reading src with ZeroCopyReadPacketData, for
// a packet source that has no ReadPacketData. Close does not close src.
func NewZeroCopy(src gopacket.ZeroCopyPacketDataSource, link pcapfile.LinkType, opt ...Option) (*Source, error) {
	if src == nil {
		return nil, errors.New("gopacketsrc: nil packet data source")
	}
	return newSource(src, link, opt)
}

// copying reads a PacketDataSource that has no zero-copy read: its buffers
// are fresh, so reading them as if they were reused is correct.
type copying struct{ gopacket.PacketDataSource }

func (c copying) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	return c.ReadPacketData()
}

// newSource makes the Source. The packet source is called through its
// interface rather than a method value, which would add a wrapper that
// copies the large result once more per packet.
func newSource(src gopacket.ZeroCopyPacketDataSource, link pcapfile.LinkType, opt []Option) (*Source, error) {
	cfg := config{batchSize: DefaultBatchSize, isTimeout: isTimeout}
	for _, o := range opt {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := checkLinkType(link); err != nil {
		return nil, err
	}
	return &Source{
		cfg:       cfg,
		link:      link,
		src:       src,
		free:      make(chan *arena, maxFreeArenas),
		headroom:  link.Headroom(),
		arenaSize: max(cfg.batchSize*arenaPerFrame, minArenaSize),
	}, nil
}

// LinkType returns the link type the Source was made with.
func (s *Source) LinkType() pcapfile.LinkType { return s.link }

// Live reports whether the Source was made [WithLive]; it implements
// [steer.LiveSource].
func (s *Source) Live() bool { return s.cfg.live }

// Backlog reports 0, 0: a gopacket source cannot see the buffer behind its
// packet source, so the dispatcher holds it back on a full queue only until
// the worker stalls (steer.LiveSource).
func (s *Source) Backlog() (used, size int) { return 0, 0 }

// SourceStats returns the packet source's own counters as
// [WithSourceStats] gives them, named "gopacket" unless that function names
// them; without WithSourceStats it returns an error, and the dispatcher
// shows none. It implements [steer.SourceStatser].
func (s *Source) SourceStats() (steer.SourceStats, error) {
	if s.cfg.stats == nil {
		return steer.SourceStats{}, errors.New("gopacketsrc: no source stats configured")
	}
	st, err := s.cfg.stats()
	if err != nil {
		return steer.SourceStats{}, fmt.Errorf("gopacketsrc: source stats: %w", err)
	}
	if st.Name == "" {
		st.Name = "gopacket"
	}
	return st, nil
}

// Stats returns the counts so far. It is safe to call at any time.
func (s *Source) Stats() Stats {
	return Stats{
		Packets:  s.stats.packets.Load(),
		Bytes:    s.stats.bytes.Load(),
		Batches:  s.stats.batches.Load(),
		Timeouts: s.stats.timeouts.Load(),
		Oversize: s.stats.oversize.Load(),
		BadVLAN:  s.stats.badVLAN.Load(),
		Runts:    s.stats.runts.Load(),
	}
}

// Close makes further ReadBatch calls return [ErrClosed]; a ReadBatch in
// progress ends its batch after the packet it is reading. Close does not
// close the packet source, whose owner closes it (see the package
// documentation for interrupting a blocked read). It is safe to call more
// than once and from any goroutine.
func (s *Source) Close() error {
	s.closed.Store(true)
	return nil
}

// ReadBatch fills b with up to the batch size of frames. It returns io.EOF
// (unwrapped) once the packet source has said io.EOF and every frame before
// it is out, ctx's error when ctx has ended before the batch, and
// [ErrClosed] after Close. Any other error of the packet source is returned,
// wrapped, by the call after the batch it ended, once; the call after that
// reads the packet source again. A read timeout of the packet source ends
// the batch, which may then be empty, with a nil error.
//
// When b has frames, b.Release is set and must be called exactly once, when
// every frame of the batch is done with; until then the frames' bytes stay
// valid. A batch with no frames has no Release.
func (s *Source) ReadBatch(ctx context.Context, b *steer.Batch) error {
	b.Frames = b.Frames[:0]
	b.Release = nil
	switch {
	case s.closed.Load():
		return ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	case s.err != nil:
		err := s.err
		s.err = nil
		return err
	case s.eof && !s.pending:
		return io.EOF
	}
	if cap(b.Frames) < s.cfg.batchSize {
		b.Frames = make([]steer.Frame, 0, s.cfg.batchSize)
	}
	clear(b.Frames[:s.cfg.batchSize])
	a := s.getArena()
	var nbytes uint64
	if s.pending {
		s.pending = false
		b.Frames = append(b.Frames, s.pendF)
		nbytes += uint64(len(s.pendF.Data))
		if !s.put(a, &b.Frames[0]) {
			a.grow(s.headroom+len(s.pendF.Data), s.arenaSize)
			s.put(a, &b.Frames[0])
		}
	}
	done := ctx.Done()
	for n := len(b.Frames); !s.eof && n < s.cfg.batchSize; n++ {
		if n > 0 && s.interrupted(done) {
			break
		}
		data, ci, err := s.src.ZeroCopyReadPacketData()
		if err != nil {
			s.readErr(err)
			break
		}
		s.npkt++
		// The frame is filled in its slot, which saves copying it around.
		b.Frames = b.Frames[:n+1]
		f := &b.Frames[n]
		s.fill(f, data, &ci)
		captured := len(f.Data)
		if !s.put(a, f) {
			if n > 0 {
				s.keep(f) // the packet starts the next batch
				b.Frames = b.Frames[:n]
				break
			}
			a.grow(s.headroom+captured, s.arenaSize)
			s.put(a, f)
		}
		nbytes += uint64(captured)
	}
	if len(b.Frames) == 0 {
		s.putArena(a)
		if s.eof {
			return io.EOF
		}
		err := s.err
		s.err = nil
		return err
	}
	s.stats.packets.Add(uint64(len(b.Frames)))
	s.stats.bytes.Add(nbytes)
	s.stats.batches.Add(1)
	b.Release = a.release
	return nil
}

// interrupted reports whether Close or the end of ctx (done) should end
// the batch before the next packet.
func (s *Source) interrupted(done <-chan struct{}) bool {
	if s.closed.Load() {
		return true
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// readErr records what an error of the packet source means for the batch
// it ends.
func (s *Source) readErr(err error) {
	switch {
	case errors.Is(err, io.EOF):
		s.eof = true
	case s.cfg.isTimeout(err):
		s.stats.timeouts.Add(1)
	default:
		s.err = fmt.Errorf("gopacketsrc: reading packet %d: %w", s.npkt+1, err)
	}
}

// fill maps a packet's capture info to frame f, whose Data is then still
// the packet source's buffer.
func (s *Source) fill(f *steer.Frame, data []byte, ci *gopacket.CaptureInfo) {
	// f is zero (ReadBatch clears the batch's slots): storing the fields
	// one by one costs less than storing a whole Frame literal.
	f.Data = data
	f.Timestamp = ci.Timestamp
	if !f.Timestamp.IsZero() {
		f.Timestamp = f.Timestamp.UTC()
	}
	// ci.Length is the wire length; a source that does not know it (zero) or
	// says less than it captured gets the captured length.
	f.WireLen = max(ci.Length, len(data))
	f.IfIndex = max(ci.InterfaceIndex, 0)
	if s.cfg.ifIndex > 0 {
		f.IfIndex = s.cfg.ifIndex
	}
	if len(data) > MaxPacketLen {
		f.Data = data[:MaxPacketLen]
		s.stats.oversize.Add(1)
	}
	if len(ci.AncillaryData) > 0 {
		vlan, ok, bad := s.vlan.find(ci.AncillaryData)
		f.VLAN, f.HasVLAN = vlan, ok
		if bad {
			s.stats.badVLAN.Add(1)
		}
	}
}

// keep copies a frame that starts the next batch out of the packet
// source's buffer.
func (s *Source) keep(f *steer.Frame) {
	s.spill = append(s.spill[:0], f.Data...)
	s.pendF = *f
	s.pendF.Data = s.spill
	s.pending = true
}

// arena holds the bytes of one batch's frames; its release callback is the
// batch's Release.
type arena struct {
	s       *Source
	buf     []byte
	off     int
	inUse   atomic.Bool
	release func()
}

// grow replaces the buffer of an empty arena with one of at least n bytes.
func (a *arena) grow(n, size int) { a.buf = make([]byte, max(n, size)) }

// put copies f's packet into the arena, with s.headroom free bytes before
// it, and makes f the Ethernet frame there. It reports false, changing
// nothing, when the rest of the arena is too small.
func (s *Source) put(a *arena, f *steer.Frame) bool {
	end := a.off + s.headroom + len(f.Data)
	if end > len(a.buf) {
		return false
	}
	region := a.buf[a.off:end:end]
	copy(region[s.headroom:], f.Data)
	a.off = end
	s.toEthernet(f, region)
	return true
}

func (s *Source) getArena() *arena {
	var a *arena
	select {
	case a = <-s.free:
	default:
		a = &arena{s: s, buf: make([]byte, s.arenaSize)}
		a.release = func() { a.s.putArena(a) }
	}
	a.off = 0
	a.inUse.Store(true)
	return a
}

// putArena takes an arena back. Releasing a batch twice would let two
// batches share one buffer, so it panics, as a negative sync.WaitGroup
// counter does.
func (s *Source) putArena(a *arena) {
	if !a.inUse.CompareAndSwap(true, false) {
		panic("gopacketsrc: batch released twice")
	}
	select {
	case s.free <- a:
	default: // enough kept; this one goes to the garbage collector
	}
}
