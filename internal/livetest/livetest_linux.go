//go:build linux

package livetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// Source is what the helpers need of a live source.
type Source interface {
	ReadBatch(ctx context.Context, b *steer.Batch) error
	Close() error
}

// Drain reads src until ctx ends or src is closed, then returns nil; any
// other error of ReadBatch ends it and is returned. Each batch is seen by
// onBatch (when not nil), counted in frames and released.
func Drain(ctx context.Context, src Source, frames *atomic.Uint64, onBatch func(b *steer.Batch)) error {
	var b steer.Batch
	for {
		if err := src.ReadBatch(ctx, &b); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if onBatch != nil {
			onBatch(&b)
		}
		frames.Add(uint64(len(b.Frames)))
		if b.Release != nil {
			b.Release()
		}
	}
}

// LinkRx reads the rx_packets counter of ns's link.
func LinkRx(t testing.TB, ns *netns.NS) uint64 {
	t.Helper()
	v, err := ns.LinkCounter(context.Background(), ns.Link, "rx_packets")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// WaitStable polls check until it reports ok with the same state three
// times in a row, 60ms apart, and returns that state; it fails the test
// with the last state if that does not happen within 10s.
func WaitStable(t testing.TB, check func() (state string, ok bool)) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	stable := 0
	for {
		cur, ok := check()
		if ok && cur == last {
			if stable++; stable >= 2 {
				return cur
			}
		} else {
			stable = 0
		}
		last = cur
		if time.Now().After(deadline) {
			t.Fatalf("counters do not add up: %s", cur)
		}
		time.Sleep(60 * time.Millisecond)
	}
}

// TrafgenUDP sends count 64-byte UDP frames from B over its link towards
// A's address, with random source ports (many flows), and waits; with tci
// not zero the frames carry an 802.1Q tag with it (68 bytes). extra is
// passed on to trafgen. It reports failures with Errorf, so it may run on
// a goroutine of its own, and none once ctx has ended.
func TrafgenUDP(t testing.TB, ctx context.Context, p *netns.Pair, count int, tci uint16, extra ...string) {
	t.Helper()
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	var sb strings.Builder
	sb.WriteString("{\n fill(0xff, 6),\n 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,\n")
	if tci != 0 {
		fmt.Fprintf(&sb, " c16(0x8100), c16(%d),\n", tci)
	}
	sb.WriteString(" c16(0x0800),\n")
	sb.WriteString(" 0x45, 0x00, c16(50), drnd(2), c16(0x4000), 64, 17, csumip(14, 33),\n")
	fmt.Fprintf(&sb, " %d, %d, %d, %d,\n %d, %d, %d, %d,\n", src[0], src[1], src[2], src[3], dst[0], dst[1], dst[2], dst[3])
	sb.WriteString(" drnd(2), c16(9), c16(30), c16(0),\n fill(0x00, 22)\n}\n")
	file := filepath.Join(t.TempDir(), "udp64.cfg")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Error(err)
		return
	}
	args := append([]string{"--dev", p.B.Link, "--conf", file, "--num", strconv.Itoa(count),
		"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"}, extra...)
	if out, err := p.B.Exec(ctx, "trafgen", args...); err != nil && ctx.Err() == nil {
		t.Errorf("trafgen: %v: %s", err, out)
	}
}

// OpenFDs counts this process's open descriptors.
func OpenFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// SocketMaps counts this process's mappings of sockets (the rings).
func SocketMaps(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "socket:[")
}

// Counts are what rounds of a close stress exercised.
type Counts struct {
	Frames         int // frames read
	HeldAtClose    int // rounds that closed while handlers held batches
	BlockedAtClose int // rounds that closed while the reader waited in poll
}

// Stress runs round(i) for i from 0 to iterations-1 on workers goroutines
// side by side, worker w taking i = w, w+workers, ... until the test has
// failed, and returns the sums of the rounds' counts. round runs on a
// goroutine of its own: it reports failures with Errorf.
func Stress(t testing.TB, workers, iterations int, round func(w, i int) Counts) Counts {
	var mu sync.Mutex
	var sum Counts
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < iterations && !t.Failed(); i += workers {
				c := round(w, i)
				mu.Lock()
				sum.Frames += c.Frames
				sum.HeldAtClose += c.HeldAtClose
				sum.BlockedAtClose += c.BlockedAtClose
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return sum
}

// Held is a batch kept across Close, with copies of its frames' bytes
// made when it was read.
type Held struct {
	steer.Batch
	Copies [][]byte
}

// hold returns b with copies of its frames' bytes.
func hold(b steer.Batch) Held {
	h := Held{Batch: b}
	for _, f := range b.Frames {
		h.Copies = append(h.Copies, bytes.Clone(f.Data))
	}
	return h
}

// CloseWhileReading starts a reader on s that touches the last byte of
// every frame and keeps the first three non-empty batches, sleeps pause,
// closes s and waits for the reader, which must end with errClosed. It
// returns the frames read and the batches kept, not released. Round i
// names the failures, reported with Errorf.
func CloseWhileReading(t testing.TB, s Source, i int, pause time.Duration, errClosed error) (frames int, held []Held) {
	return closeWhileReading(t, s, i, false, pause, errClosed)
}

// CloseAfterFrames is CloseWhileReading that sleeps pause only once the
// reader has read a frame, waiting up to a second for one (a failure if
// none comes), so that the close comes under traffic however slowly the
// traffic runs.
func CloseAfterFrames(t testing.TB, s Source, i int, pause time.Duration, errClosed error) (frames int, held []Held) {
	return closeWhileReading(t, s, i, true, pause, errClosed)
}

// closeWhileReading is CloseWhileReading, with first CloseAfterFrames.
func closeWhileReading(t testing.TB, s Source, i int, first bool, pause time.Duration, errClosed error) (frames int, held []Held) {
	type result struct {
		err   error
		held  []Held
		count int
	}
	resc := make(chan result, 1)
	read := make(chan struct{})
	go func() {
		var r result
		for {
			var b steer.Batch
			if r.err = s.ReadBatch(context.Background(), &b); r.err != nil {
				resc <- r
				return
			}
			if r.count == 0 && len(b.Frames) > 0 {
				close(read)
			}
			r.count += len(b.Frames)
			for _, f := range b.Frames {
				_ = f.Data[len(f.Data)-1]
			}
			if len(b.Frames) > 0 && len(r.held) < 3 {
				r.held = append(r.held, hold(b))
			} else if b.Release != nil {
				b.Release()
			}
		}
	}()
	if first {
		select {
		case <-read:
		case <-time.After(time.Second):
			t.Errorf("iteration %d: no frame in a second", i)
		}
	}
	if pause > 0 {
		time.Sleep(pause)
	}
	if err := s.Close(); err != nil {
		t.Errorf("iteration %d: Close: %v", i, err)
	}
	r := <-resc
	if !errors.Is(r.err, errClosed) {
		t.Errorf("iteration %d: reader ended with %v", i, r.err)
	}
	return r.count, r.held
}

// HoldThenClose reads s until it holds two non-empty batches (each read
// within a second), closes s, and checks that a ReadBatch after Close
// returns errClosed. It returns the frames read and the batches held, not
// released. Round i names the failures, reported with Errorf.
func HoldThenClose(t testing.TB, s Source, i int, errClosed error) (frames int, held []Held) {
	for len(held) < 2 {
		var b steer.Batch
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.ReadBatch(ctx, &b)
		cancel()
		if err != nil {
			t.Errorf("iteration %d: %v", i, err)
			break
		}
		if len(b.Frames) > 0 {
			frames += len(b.Frames)
			held = append(held, hold(b))
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("iteration %d: Close: %v", i, err)
	}
	var b steer.Batch
	if err := s.ReadBatch(context.Background(), &b); !errors.Is(err, errClosed) {
		t.Errorf("iteration %d: ReadBatch after Close: %v", i, err)
	}
	return frames, held
}

// ReleaseAfterClose checks that every frame of the batches held across
// Close still has the bytes it was read with, newest batch first,
// releases each batch, and closes s a second time, which must return nil.
// Round i names the failures, reported with Errorf.
func ReleaseAfterClose(t testing.TB, s Source, i int, held []Held) {
	for j := len(held) - 1; j >= 0; j-- {
		for k, f := range held[j].Frames {
			if !bytes.Equal(f.Data, held[j].Copies[k]) {
				t.Errorf("iteration %d: a frame of %d bytes held across Close changed", i, len(f.Data))
			}
		}
		held[j].Release()
	}
	if err := s.Close(); err != nil {
		t.Errorf("iteration %d: second Close: %v", i, err)
	}
}

// Reader reads a source from a goroutine until Stop, counting the frames.
type Reader struct {
	cancel context.CancelFunc
	done   chan struct{}
	frames atomic.Uint64
	err    error
}

// Read starts a Reader on src: each batch is seen by onBatch (when not
// nil), counted and released (see Drain).
func Read(src Source, onBatch func(b *steer.Batch)) *Reader {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = Drain(ctx, src, &r.frames, onBatch)
	}()
	return r
}

// Frames returns the frames read so far.
func (r *Reader) Frames() uint64 { return r.frames.Load() }

// Stop ends the reading and waits for it; an error of ReadBatch other
// than the end or the source's Close fails t.
func (r *Reader) Stop(t testing.TB) {
	t.Helper()
	r.cancel()
	<-r.done
	if r.err != nil {
		t.Errorf("ReadBatch: %v", r.err)
	}
}

// Total returns the frames the readers have read.
func Total[R interface{ Frames() uint64 }](readers []R) uint64 {
	var n uint64
	for _, r := range readers {
		n += r.Frames()
	}
	return n
}
