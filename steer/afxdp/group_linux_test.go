//go:build linux

package afxdp

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/xsk"
	"github.com/rpsgo/rps/steer"
)

// spread attaches, for the tests, a program that redirects every frame to
// a random socket of g (bpf_get_prandom_u32() % n), from inside ns, and
// returns its cleanup.
func spread(t *testing.T, ns *netns.NS, g *Group) func() {
	t.Helper()
	n := g.Len()
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(n)})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range g.Sources() {
		if err := s.withFD(func(fd int) error { return xsks.Put(uint32(i), uint32(fd)) }); err != nil {
			t.Fatal(err)
		}
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.FnGetPrandomU32.Call(),
			asm.Mod.Imm(asm.R0, int32(n)),
			asm.Mov.Reg(asm.R2, asm.R0),
			asm.LoadMapPtr(asm.R1, xsks.FD()),
			asm.Mov.Imm(asm.R3, xdpPass),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		},
		License: "BSD",
	})
	if err != nil {
		xsks.Close()
		t.Fatal(err)
	}
	var l link.Link
	err = ns.Do(func() (err error) {
		l, _, err = attachProgram(g.sources[0].ns, prog, g.Info().Ifindex, AttachNative)
		return err
	})
	if err != nil {
		prog.Close()
		xsks.Close()
		t.Fatal(err)
	}
	return func() {
		l.Close()
		prog.Close()
		xsks.Close()
	}
}

// TestGroupSharedUMEM opens a group of four sockets on one queue sharing
// one UMEM, spreads the frames over them at random, and releases every
// batch from other goroutines, in any order: the one FILL ring gets
// chunks from every socket's releases at once. Each held frame must keep
// its bytes until its release (a chunk handed out twice would be
// overwritten), every socket must receive, and the counters must add up
// to the interface's.
func TestGroupSharedUMEM(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	fds0, rings0, umems0 := openFDs(t), socketMaps(t), xsk.MappedAreas()
	const n = 4
	var g *Group
	if err := p.A.Do(func() (err error) {
		g, err = OpenGroup(p.A.Link, n, Config{Host: HostTake, NumFrames: 256, RingSize: 128, BatchSize: 16})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Len() != n || g.Source(n) != nil || g.Source(-1) != nil || len(g.Sources()) != n {
		t.Fatalf("group of %d: Len %d", n, g.Len())
	}
	for i, s := range g.Sources() {
		if info := s.Info(); info.Attach != AttachNone || info.ZeroCopy || info.Queue != 0 {
			t.Errorf("socket %d: %+v", i, info)
		}
	}
	// Outside the namespace the interface index names another interface:
	// the attach must refuse.
	if _, _, err := attachProgram(g.sources[0].ns, nil, g.Info().Ifindex, AttachNative); !errors.Is(err, errOtherNetNS) {
		t.Fatalf("attach from the host namespace: %v", err)
	}
	detach := spread(t, p.A, g)

	type job struct {
		b    steer.Batch
		copy [][]byte
	}
	jobs := make(chan job, 64)
	var bad sync.Map
	var rel sync.WaitGroup
	for w := 0; w < 4; w++ {
		rel.Add(1)
		go func() {
			defer rel.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			var pending []job
			flush := func() {
				r.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
				for _, j := range pending {
					for k, f := range j.b.Frames {
						if !bytes.Equal(f.Data, j.copy[k]) {
							bad.Store(&j.copy[k], true)
						}
					}
					j.b.Release()
				}
				pending = pending[:0]
			}
			for j := range jobs {
				if pending = append(pending, j); len(pending) >= 1+r.IntN(4) {
					flush()
				}
			}
			flush()
		}()
	}
	var readers []*livetest.Reader
	for _, s := range g.Sources() {
		readers = append(readers, readHeld(s, func(b steer.Batch) {
			c := make([][]byte, len(b.Frames))
			for i, f := range b.Frames {
				c[i] = bytes.Clone(f.Data)
			}
			jobs <- job{b, c}
		}))
	}
	r0 := rxPackets(t, p.A)
	const frames = 30000
	trafgenUDP(t, context.Background(), p, frames, "--gap", "5us")
	rx, st := settleGroup(t, p.A, r0, g, readers)
	for _, r := range readers {
		r.Stop(t)
	}
	close(jobs)
	rel.Wait()
	detach()
	bad.Range(func(k, v any) bool {
		t.Error("a held frame changed before its release: its chunk was handed out twice")
		return false
	})
	t.Logf("rx %d: %+v", rx, st)
	for i, s := range g.Sources() {
		sst, _ := s.Stats()
		t.Logf("socket %d: %+v", i, sst)
		if sst.Delivered == 0 {
			t.Errorf("socket %d received nothing", i)
		}
	}
	if rx < frames || st.RxInvalidDescs != 0 {
		t.Errorf("rx %d of %d sent, %+v", rx, frames, st)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if livetest.XDPAttached(t, p.A) {
		t.Error("an XDP program is left on the link")
	}
	if fds, rings, umems := openFDs(t), socketMaps(t), xsk.MappedAreas(); fds != fds0 || rings != rings0 || umems != umems0 {
		t.Errorf("leak: %d descriptors, %d ring and %d UMEM mappings, had %d, %d and %d", fds, rings, umems, fds0, rings0, umems0)
	}
}

// readHeld reads src from a goroutine and passes every batch with frames
// to keep, which must release it.
func readHeld(src *Source, keep func(b steer.Batch)) *livetest.Reader {
	return livetest.Read(src, func(b *steer.Batch) {
		if len(b.Frames) == 0 {
			return
		}
		frames := append([]steer.Frame(nil), b.Frames...)
		keep(steer.Batch{Frames: frames, Release: b.Release})
		b.Release = nil
	})
}

// settleGroup is settle for a group: rx delta == the group's Received,
// and the readers saw its Delivered frames.
func settleGroup(t testing.TB, ns *netns.NS, r0 uint64, g *Group, readers []*livetest.Reader) (uint64, Stats) {
	t.Helper()
	return settleStats(t, ns, r0, g.Stats, func() uint64 { return livetest.Total(readers) })
}

// TestGroupCloseHeld closes a group while its readers wait in poll and
// while batches of every socket are held: the readers end with ErrClosed,
// the held frames stay readable until released after Close, and then
// nothing is left behind.
func TestGroupCloseHeld(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	fds0, rings0, umems0 := openFDs(t), socketMaps(t), xsk.MappedAreas()
	var g *Group
	if err := p.A.Do(func() (err error) {
		g, err = OpenGroup(p.A.Link, 3, Config{Host: HostTake, NumFrames: 128, RingSize: 64, BatchSize: 8, PollTimeout: -1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	detach := spread(t, p.A, g)
	trafgenUDP(t, context.Background(), p, 300)
	var held []steer.Batch
	for i, s := range g.Sources() {
		var b steer.Batch
		if err := s.ReadBatch(context.Background(), &b); err != nil || len(b.Frames) == 0 {
			t.Fatalf("socket %d: %d frames, %v", i, len(b.Frames), err)
		}
		held = append(held, b)
	}
	detach()
	// Drain what is left, then wait in poll (no program feeds them now).
	errc := make(chan error, g.Len())
	for _, s := range g.Sources() {
		go func() {
			for {
				var b steer.Batch
				if err := s.ReadBatch(context.Background(), &b); err != nil {
					errc <- err
					return
				}
				if b.Release != nil {
					b.Release()
				}
			}
		}()
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for range g.Len() {
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Errorf("reader ended with %v", err)
		}
	}
	if xsk.MappedAreas() != umems0+1 {
		t.Error("the UMEM was unmapped while batches were held")
	}
	for _, b := range held {
		for _, f := range b.Frames {
			if len(f.Data) != 64 || f.Data[12] != 0x08 || f.Data[23] != 17 {
				t.Errorf("a held frame changed after Close: % x", f.Data)
			}
		}
		b.Release()
	}
	if fds, rings, umems := openFDs(t), socketMaps(t), xsk.MappedAreas(); fds != fds0 || rings != rings0 || umems != umems0 {
		t.Errorf("leak: %d descriptors, %d ring and %d UMEM mappings, had %d, %d and %d", fds, rings, umems, fds0, rings0, umems0)
	}
}

// TestGroupFillCount starves a group's one FILL ring (every batch held)
// while frames arrive: the kernel reports the ring's
// rx_fill_ring_empty_descs on every socket, so only the first socket (the
// ring's owner) may carry it, in Stats and SourceStats, for sums over the
// sockets to count it once.
func TestGroupFillCount(t *testing.T) {
	p := netns.New(t, netns.Options{})
	var g *Group
	if err := p.A.Do(func() (err error) {
		g, err = OpenGroup(p.A.Link, 2, Config{Host: HostTake, NumFrames: 64, RingSize: 64, BatchSize: 8})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	detach := spread(t, p.A, g)
	defer detach()
	var mu sync.Mutex
	var held []steer.Batch
	var readers []*livetest.Reader
	for _, s := range g.Sources() {
		readers = append(readers, readHeld(s, func(b steer.Batch) {
			mu.Lock()
			held = append(held, b)
			mu.Unlock()
		}))
	}
	livetest.SendFrom(t, p, 64, livetest.SeqTraffic(p, 0, 8, 50, 0))
	kernelCount := func(s *Source) uint64 {
		var ks unix.XDPStatistics
		if err := s.withFD(func(fd int) error {
			var err error
			ks, err = xsk.Statistics(fd)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ks.Rx_fill_ring_empty_descs
	}
	var first, second Stats
	for deadline := time.Now().Add(5 * time.Second); ; {
		first, _ = g.Source(0).Stats()
		second, _ = g.Source(1).Stats()
		if first.RxFillRingEmptyDescs > 0 && kernelCount(g.Source(1)) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	sum, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	ss0, _ := g.Source(0).SourceStats()
	ss1, _ := g.Source(1).SourceStats()
	t.Logf("socket 0 %+v, socket 1 %+v, the kernel's count on socket 1 %d", first, second, kernelCount(g.Source(1)))
	switch {
	case first.RxFillRingEmptyDescs == 0 || kernelCount(g.Source(1)) == 0:
		t.Fatal("the FILL ring never ran empty: the test did not starve it")
	case second.RxFillRingEmptyDescs != 0 || kernelCounter(ss1, "rx_fill_ring_empty_descs") != 0:
		t.Errorf("socket 1 reports the shared FILL ring's count: %d, %d", second.RxFillRingEmptyDescs, kernelCounter(ss1, "rx_fill_ring_empty_descs"))
	case kernelCounter(ss0, "rx_fill_ring_empty_descs") == 0 || sum.RxFillRingEmptyDescs < first.RxFillRingEmptyDescs || sum.RxFillRingEmptyDescs > kernelCounter(ss0, "rx_fill_ring_empty_descs"):
		t.Errorf("the group's count %d, socket 0's %d (SourceStats %d)", sum.RxFillRingEmptyDescs, first.RxFillRingEmptyDescs, kernelCounter(ss0, "rx_fill_ring_empty_descs"))
	}
	for _, r := range readers {
		r.Stop(t)
	}
	for _, b := range held {
		b.Release()
	}
}
