package gopacketsrc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/gopacketsrc/internal/fake/gopacket/afpacket"
	"github.com/rpsgo/rps/steer/gopacketsrc/internal/fake/gopacket/pcap"
	"github.com/rpsgo/rps/steer/gopacketsrc/internal/fake/gopacket/pfring"
	"github.com/rpsgo/rps/steer/pcapfile"
)

func TestLinkTypes(t *testing.T) {
	s := &script{}
	if _, err := gopacketsrc.New(plain{s}, pcapfile.LinkType(layers.LinkTypeEthernet)); err != nil {
		t.Fatalf("Ethernet: %v", err)
	}
	// The link types pcapfile rewrites are taken (TestLinkTypesAsPcapfile
	// reads them); any other is an error that names it and matches
	// pcapfile.ErrLinkType.
	for _, lt := range []pcapfile.LinkType{pcapfile.LinkTypeIEEE802_11, 9999} {
		_, err := gopacketsrc.New(plain{s}, lt)
		if !errors.Is(err, pcapfile.ErrLinkType) {
			t.Errorf("link type %s (%d): error %v, want one wrapping ErrLinkType", lt, uint32(lt), err)
			continue
		}
		if !strings.Contains(err.Error(), lt.String()) || !strings.HasPrefix(err.Error(), "gopacketsrc: ") {
			t.Errorf("link type %s: error %q does not name it", lt, err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	s := &script{}
	for name, f := range map[string]func() error{
		"nil source":   func() error { _, err := gopacketsrc.New(nil, pcapfile.LinkTypeEthernet); return err },
		"nil zc":       func() error { _, err := gopacketsrc.NewZeroCopy(nil, pcapfile.LinkTypeEthernet); return err },
		"batch 0":      func() error { _, err := gopacketsrc.NewZeroCopy(s, 1, gopacketsrc.WithBatchSize(0)); return err },
		"batch 1025":   func() error { _, err := gopacketsrc.NewZeroCopy(s, 1, gopacketsrc.WithBatchSize(1025)); return err },
		"ifindex 0":    func() error { _, err := gopacketsrc.NewZeroCopy(s, 1, gopacketsrc.WithIfIndex(0)); return err },
		"nil timeout":  func() error { _, err := gopacketsrc.NewZeroCopy(s, 1, gopacketsrc.WithTimeoutError(nil)); return err },
		"nil stats fn": func() error { _, err := gopacketsrc.NewZeroCopy(s, 1, gopacketsrc.WithSourceStats(nil)); return err },
	} {
		if err := f(); err == nil || !strings.HasPrefix(err.Error(), "gopacketsrc: ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// TestCaptureInfo checks how each CaptureInfo field becomes a Frame field.
func TestCaptureInfo(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	data := numbered(0, 60)
	tests := []struct {
		name string
		ci   gopacket.CaptureInfo
		opt  []gopacketsrc.Option
		want steer.Frame // Data aside
		bad  uint64      // BadVLAN count
	}{
		{name: "plain", ci: gopacket.CaptureInfo{Timestamp: ts, CaptureLength: 60, Length: 60, InterfaceIndex: 3},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60, IfIndex: 3}},
		{name: "snaplen-cut", ci: gopacket.CaptureInfo{Timestamp: ts, CaptureLength: 60, Length: 1514},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 1514}},
		{name: "length-unknown", ci: gopacket.CaptureInfo{Timestamp: ts, CaptureLength: 60},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60}},
		{name: "length-below-captured", ci: gopacket.CaptureInfo{Timestamp: ts, CaptureLength: 60, Length: 20},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60}},
		{name: "no-time", ci: gopacket.CaptureInfo{CaptureLength: 60, Length: 60},
			want: steer.Frame{WireLen: 60}},
		{name: "negative-ifindex", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60, InterfaceIndex: -2},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60}},
		{name: "WithIfIndex", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60, InterfaceIndex: 3},
			opt:  []gopacketsrc.Option{gopacketsrc.WithIfIndex(7)},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60, IfIndex: 7}},
		{name: "vlan", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60, AncillaryData: []any{afpacket.AncillaryVLAN{VLAN: 100}}},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60, VLAN: 100, HasVLAN: true}},
		{name: "vlan-0", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60, AncillaryData: []any{afpacket.AncillaryVLAN{VLAN: 0}}},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60, VLAN: 0, HasVLAN: true}},
		{name: "vlan-4095", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60, AncillaryData: []any{"other", 17, afpacket.AncillaryVLAN{VLAN: 4095}}},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60, VLAN: 4095, HasVLAN: true}},
		{name: "vlan-4096", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60, AncillaryData: []any{afpacket.AncillaryVLAN{VLAN: 4096}}},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60}, bad: 1},
		{name: "vlan-negative", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60, AncillaryData: []any{afpacket.AncillaryVLAN{VLAN: -1}}},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60}, bad: 1},
		{name: "vlan-lookalike", ci: gopacket.CaptureInfo{Timestamp: ts, Length: 60,
			AncillaryData: []any{struct{ VLAN int }{5}, &afpacket.AncillaryVLAN{VLAN: 6}}},
			want: steer.Frame{Timestamp: ts.UTC(), WireLen: 60}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{pkts: []pkt{{data: data, ci: tt.ci}}}
			src := newSource(t, s, tt.opt...)
			frames, _, err := readAll(t, src)
			if err != io.EOF || len(frames) != 1 {
				t.Fatalf("got %d frames, %v", len(frames), err)
			}
			f := frames[0]
			if !bytes.Equal(f.Data, data) {
				t.Errorf("Data % x, want % x", f.Data, data)
			}
			f.Data = nil
			if !f.Timestamp.Equal(tt.want.Timestamp) || f.Timestamp.Location() != tt.want.Timestamp.Location() {
				t.Errorf("Timestamp %v, want %v", f.Timestamp, tt.want.Timestamp)
			}
			f.Timestamp, tt.want.Timestamp = time.Time{}, time.Time{}
			if f.WireLen != tt.want.WireLen || f.IfIndex != tt.want.IfIndex || f.VLAN != tt.want.VLAN ||
				f.HasVLAN != tt.want.HasVLAN || f.FlowID != 0 || f.HashType != tt.want.HashType {
				t.Errorf("frame %+v, want %+v", f, tt.want)
			}
			if got := src.Stats().BadVLAN; got != tt.bad {
				t.Errorf("BadVLAN %d, want %d", got, tt.bad)
			}
		})
	}
}

// TestOddPackets feeds packets of odd sizes: empty, cut by a snap length,
// larger than the rest of an arena, larger than a whole arena, larger than
// MaxPacketLen.
func TestOddPackets(t *testing.T) {
	sizes := []int{
		0, 8, 60, 0, 1514, 9000, 40000, 40000, 40000, // three that cannot share a 64 KiB arena
		70000, 8, 200000, gopacketsrc.MaxPacketLen, gopacketsrc.MaxPacketLen + 1, 300000, 8, 0,
	}
	var pkts []pkt
	for i, n := range sizes {
		var d []byte
		if n >= 8 {
			d = numbered(i, n)
		} else {
			d = make([]byte, n)
		}
		pkts = append(pkts, pkt{data: d, ci: gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: n, Length: n + 4}})
	}
	for _, bs := range []int{1, 2, 4, 64} {
		t.Run("batch"+string(rune('0'+bs%10)), func(t *testing.T) {
			s := &script{pkts: pkts}
			src := newSource(t, s, gopacketsrc.WithBatchSize(bs))
			// Between batches the packet source's buffer is overwritten, as
			// closing a pcap handle frees it: a packet kept for the next
			// batch must not be read from there.
			frames, batches, err := readAll(t, scribbler{src, s})
			if err != io.EOF {
				t.Fatal(err)
			}
			if len(frames) != len(sizes) {
				t.Fatalf("%d frames, want %d (batches %v)", len(frames), len(sizes), batches)
			}
			for i, f := range frames {
				n := sizes[i]
				want := min(n, gopacketsrc.MaxPacketLen)
				if len(f.Data) != want || f.WireLen != n+4 || f.Timestamp.Unix() != int64(i) {
					t.Errorf("frame %d: %d bytes, length %d, time %d; want %d, %d, %d",
						i, len(f.Data), f.WireLen, f.Timestamp.Unix(), want, n+4, i)
				}
				if n >= 8 {
					if err := checkNumbered(f.Data, i); err != nil {
						t.Error(err)
					}
				}
			}
			for _, n := range batches {
				if n < 1 || n > bs {
					t.Errorf("batch sizes %v, want each in 1..%d", batches, bs)
					break
				}
			}
			st := src.Stats()
			if st.Oversize != 2 || st.Packets != uint64(len(sizes)) || st.Batches != uint64(len(batches)) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// scribbler overwrites a script's buffer after each batch.
type scribbler struct {
	*gopacketsrc.Source
	s *script
}

func (w scribbler) ReadBatch(ctx context.Context, b *steer.Batch) error {
	err := w.Source.ReadBatch(ctx, b)
	for i := range w.s.buf {
		w.s.buf[i] = 0xdd
	}
	return err
}

// TestBatches checks that batches fill to the batch size, that io.EOF ends
// the last one and stays, and that the packet source is not read again
// after its io.EOF.
func TestBatches(t *testing.T) {
	var pkts []pkt
	for i := range 150 {
		pkts = append(pkts, pkt{data: numbered(i, 64), ci: ci(int64(i), 64)})
	}
	s := &script{pkts: pkts}
	src := newSource(t, s)
	frames, sizes, err := readAll(t, src)
	if err != io.EOF {
		t.Fatalf("error %v, want io.EOF unwrapped", err)
	}
	if want := []int{64, 64, 22}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v", sizes, want)
	}
	for i, f := range frames {
		if err := checkNumbered(f.Data, i); err != nil {
			t.Fatal(err)
		}
	}
	reads := s.reads
	var b steer.Batch
	for range 3 {
		if err := src.ReadBatch(context.Background(), &b); err != io.EOF || len(b.Frames) != 0 {
			t.Fatalf("after the end: %v, %d frames", err, len(b.Frames))
		}
	}
	if s.reads != reads {
		t.Errorf("the packet source was read %d more times after io.EOF", s.reads-reads)
	}
	if st := src.Stats(); st.Packets != 150 || st.Bytes != 150*64 || st.Batches != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestErrors checks that an error of the packet source ends the batch
// after the frames before it, is returned by the next call, wrapped, and
// that reading goes on after it.
func TestErrors(t *testing.T) {
	boom := errors.New("boom")
	s := &script{pkts: []pkt{
		{err: boom}, // before any frame
		{data: numbered(0, 60), ci: ci(0, 60)},
		{data: numbered(1, 60), ci: ci(1, 60)},
		{err: io.ErrUnexpectedEOF}, // inside a batch
		{data: numbered(2, 60), ci: ci(2, 60)},
	}}
	src := newSource(t, s)
	var b steer.Batch
	ctx := context.Background()
	steps := []struct {
		frames int
		err    error
	}{{0, boom}, {2, nil}, {0, io.ErrUnexpectedEOF}, {1, nil}, {0, io.EOF}}
	for i, st := range steps {
		err := src.ReadBatch(ctx, &b)
		if len(b.Frames) != st.frames || !errors.Is(err, st.err) || (st.err == nil) != (err == nil) {
			t.Fatalf("call %d: %d frames, %v; want %d, %v", i, len(b.Frames), err, st.frames, st.err)
		}
		if err != nil && err != io.EOF && !strings.HasPrefix(err.Error(), "gopacketsrc: reading packet ") {
			t.Errorf("call %d: error %q is not wrapped with context", i, err)
		}
		if b.Release != nil {
			b.Release()
		}
	}
	// An io.EOF the packet source wraps is the end too.
	src = newSource(t, &script{pkts: []pkt{{data: numbered(0, 60), ci: ci(0, 60)}, {err: wrapped{io.EOF}}}})
	if frames, _, err := readAll(t, src); err != io.EOF || len(frames) != 1 {
		t.Errorf("a wrapped io.EOF: %d frames, %v", len(frames), err)
	}
}

type wrapped struct{ error }

func (w wrapped) Unwrap() error { return w.error }

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

// TestTimeouts checks that a read timeout ends the batch with a nil error
// (an empty batch when it comes first) and is counted, for each kind of
// timeout error recognised by default, and that other errors of the same
// types are errors.
func TestTimeouts(t *testing.T) {
	for _, tt := range []struct {
		err     error
		timeout bool
	}{
		{netTimeout{}, true},
		{os.ErrDeadlineExceeded, true},
		{wrapped{os.ErrDeadlineExceeded}, true},
		{pcap.NextErrorTimeoutExpired, true},
		{pcap.NextErrorReadError, false},
		{pfring.NextNoPacketNonblocking, true},
		{pfring.NextError, false},
		{errors.New("packet poll timeout expired"), true}, // gopacket/afpacket's ErrTimeout
		{errors.New("packet poll failed"), false},         // and its ErrPoll
	} {
		s := &script{pkts: []pkt{
			{err: tt.err},
			{data: numbered(0, 60), ci: ci(0, 60)},
			{err: tt.err},
			{data: numbered(1, 60), ci: ci(1, 60)},
		}}
		src := newSource(t, s)
		var b steer.Batch
		var got []int
		var errs []error
		for range 6 {
			err := src.ReadBatch(context.Background(), &b)
			got = append(got, len(b.Frames))
			errs = append(errs, err)
			if b.Release != nil {
				b.Release()
			}
			if err == io.EOF {
				break
			}
		}
		if tt.timeout {
			if !slices.Equal(got, []int{0, 1, 1, 0}) || errs[0] != nil || errs[1] != nil || errs[2] != nil || errs[3] != io.EOF {
				t.Errorf("%T %v: batches %v, errors %v", tt.err, tt.err, got, errs)
			}
			if n := src.Stats().Timeouts; n != 2 {
				t.Errorf("%T %v: %d timeouts counted, want 2", tt.err, tt.err, n)
			}
		} else if !errors.Is(errs[0], tt.err) || src.Stats().Timeouts != 0 {
			t.Errorf("%T %v: first call returned %v, timeouts %d", tt.err, tt.err, errs[0], src.Stats().Timeouts)
		}
	}

	// WithTimeoutError replaces the default test.
	mine := errors.New("my timeout")
	s := &script{pkts: []pkt{{err: mine}, {err: netTimeout{}}}}
	src := newSource(t, s, gopacketsrc.WithTimeoutError(func(err error) bool { return err == mine }))
	var b steer.Batch
	if err := src.ReadBatch(context.Background(), &b); err != nil {
		t.Errorf("own timeout: %v", err)
	}
	if err := src.ReadBatch(context.Background(), &b); !errors.Is(err, netTimeout{}) {
		t.Errorf("a default timeout after WithTimeoutError: %v, want an error", err)
	}
}

// TestContext checks that ReadBatch returns ctx's error when ctx has ended,
// and that a ctx ending while a batch is being read ends the batch after
// the packet being read.
func TestContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var pkts []pkt
	for i := range 10 {
		pkts = append(pkts, pkt{data: numbered(i, 60), ci: ci(int64(i), 60)})
	}
	pkts[3].before = cancel // cancelled while packet 3 is read
	s := &script{pkts: pkts}
	src := newSource(t, s)
	var b steer.Batch
	if err := src.ReadBatch(ctx, &b); err != nil || len(b.Frames) != 4 {
		t.Fatalf("%d frames, %v; want 4, nil", len(b.Frames), err)
	}
	b.Release()
	if err := src.ReadBatch(ctx, &b); err != context.Canceled || len(b.Frames) != 0 || b.Release != nil {
		t.Fatalf("after cancel: %d frames, %v", len(b.Frames), err)
	}
	if s.reads != 4 {
		t.Errorf("%d reads, want 4", s.reads)
	}
	// The frames read go on with a new context.
	frames, _, err := readAll(t, src)
	if err != io.EOF || len(frames) != 6 || checkNumbered(frames[0].Data, 4) != nil {
		t.Errorf("after cancel: %d frames, %v", len(frames), err)
	}
}

// TestClose checks that Close ends a batch being read and that ReadBatch
// returns ErrClosed afterwards.
func TestClose(t *testing.T) {
	var src *gopacketsrc.Source
	var pkts []pkt
	for i := range 10 {
		pkts = append(pkts, pkt{data: numbered(i, 60), ci: ci(int64(i), 60)})
	}
	pkts[2].before = func() { src.Close() }
	src = newSource(t, &script{pkts: pkts})
	var b steer.Batch
	if err := src.ReadBatch(context.Background(), &b); err != nil || len(b.Frames) != 3 {
		t.Fatalf("%d frames, %v; want 3, nil", len(b.Frames), err)
	}
	b.Release() // a batch read before Close stays valid and is released as usual
	for range 2 {
		if err := src.ReadBatch(context.Background(), &b); err != gopacketsrc.ErrClosed || len(b.Frames) != 0 {
			t.Fatalf("after Close: %d frames, %v", len(b.Frames), err)
		}
	}
	if err := src.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestReleaseContract checks that frames stay valid until their batch is
// released, whatever the packet source does with its buffer meanwhile,
// that arenas are reused only after Release, and that a second Release
// panics.
func TestReleaseContract(t *testing.T) {
	var pkts []pkt
	const n = 1000
	for i := range n {
		pkts = append(pkts, pkt{data: numbered(i, 100+i%1400), ci: ci(int64(i), 100+i%1400)})
	}
	src := newSource(t, &script{pkts: pkts}, gopacketsrc.WithBatchSize(16))
	var held []steer.Batch
	ctx := context.Background()
	next := 0
	for {
		var b steer.Batch
		err := src.ReadBatch(ctx, &b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
		// Release every other batch at once; hold the rest to the end.
		if len(held)%2 == 0 {
			for i, f := range b.Frames {
				if err := checkNumbered(f.Data, next+i); err != nil {
					t.Fatal(err)
				}
			}
			b.Release()
		}
		next += len(b.Frames)
	}
	if next != n {
		t.Fatalf("%d frames, want %d", next, n)
	}
	next = 0
	for i, b := range held {
		if (i+1)%2 == 1 {
			for j, f := range b.Frames {
				if err := checkNumbered(f.Data, next+j); err != nil {
					t.Fatalf("held batch %d: %v", i, err)
				}
			}
			b.Release()
		}
		next += len(b.Frames)
	}

	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "released twice") {
			t.Errorf("a second Release: recovered %v, want a panic", r)
		}
	}()
	held[0].Release()
}

// TestNoAllocs checks that reading and releasing batches allocates nothing
// in steady state.
func TestNoAllocs(t *testing.T) {
	src, err := gopacketsrc.NewZeroCopy(&loop{data: numbered(1, 590)}, pcapfile.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	var b steer.Batch
	ctx, cancel := context.WithCancel(context.Background()) // a ctx with a Done channel
	defer cancel()
	allocs := testing.AllocsPerRun(1000, func() {
		if err := src.ReadBatch(ctx, &b); err != nil || len(b.Frames) != gopacketsrc.DefaultBatchSize {
			t.Fatalf("%d frames, %v", len(b.Frames), err)
		}
		b.Release()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per batch, want 0", allocs)
	}
}

// loop is a zero-copy packet source that returns the same packet forever,
// as fast as a packet source can, with a VLAN tag every other packet.
type loop struct {
	data []byte
	n    int
	anc  []any
}

func (l *loop) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	l.n++
	ci := gopacket.CaptureInfo{CaptureLength: len(l.data), Length: len(l.data), InterfaceIndex: 1}
	if l.n%2 == 0 {
		if l.anc == nil {
			l.anc = []any{afpacket.AncillaryVLAN{VLAN: 7}}
		}
		ci.AncillaryData = l.anc
	}
	return l.data, ci, nil
}

// TestPlainSource checks a PacketDataSource without ZeroCopyReadPacketData.
func TestPlainSource(t *testing.T) {
	var pkts []pkt
	for i := range 100 {
		pkts = append(pkts, pkt{data: numbered(i, 80), ci: ci(int64(i), 80)})
	}
	src, err := gopacketsrc.New(plain{&script{pkts: pkts}}, pcapfile.LinkTypeEthernet, gopacketsrc.WithBatchSize(7))
	if err != nil {
		t.Fatal(err)
	}
	frames, sizes, err := readAll(t, src)
	if err != io.EOF || len(frames) != 100 || sizes[0] != 7 {
		t.Fatalf("%d frames in batches %v, %v", len(frames), sizes, err)
	}
	for i, f := range frames {
		if err := checkNumbered(f.Data, i); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLiveAndSourceStats(t *testing.T) {
	s := &script{}
	src := newSource(t, s)
	var _ steer.LiveSource = src
	var _ steer.SourceStatser = src
	if src.Live() {
		t.Error("Live without WithLive")
	}
	if _, err := src.SourceStats(); err == nil {
		t.Error("SourceStats without WithSourceStats: no error")
	}
	src = newSource(t, s, gopacketsrc.WithLive(), gopacketsrc.WithSourceStats(func() (steer.SourceStats, error) {
		return steer.SourceStats{Received: 10, Dropped: 2}, nil
	}))
	if !src.Live() {
		t.Error("not Live with WithLive")
	}
	st, err := src.SourceStats()
	if err != nil || !reflect.DeepEqual(st, steer.SourceStats{Name: "gopacket", Received: 10, Dropped: 2}) {
		t.Errorf("SourceStats %+v, %v", st, err)
	}
	boom := errors.New("boom")
	src = newSource(t, s, gopacketsrc.WithSourceStats(func() (steer.SourceStats, error) { return steer.SourceStats{}, boom }))
	if _, err := src.SourceStats(); !errors.Is(err, boom) {
		t.Errorf("SourceStats error %v", err)
	}
}

// TestReusedBatch checks that a batch reused from call to call carries
// nothing over from the frames it held before.
func TestReusedBatch(t *testing.T) {
	src, err := gopacketsrc.NewZeroCopy(&loop{data: numbered(1, 100)}, pcapfile.LinkTypeEthernet, gopacketsrc.WithBatchSize(5))
	if err != nil {
		t.Fatal(err)
	}
	var b steer.Batch
	for call := range 4 {
		if err := src.ReadBatch(context.Background(), &b); err != nil || len(b.Frames) != 5 {
			t.Fatalf("%d frames, %v", len(b.Frames), err)
		}
		for i, f := range b.Frames {
			// loop tags every other packet, counting from 1.
			tagged := (call*5+i+1)%2 == 0
			if f.HasVLAN != tagged || (tagged && f.VLAN != 7) || f.FlowID != 0 || f.HashType != 0 {
				t.Errorf("call %d frame %d: vlan %v %d, flowid %d, hash type %v", call, i, f.HasVLAN, f.VLAN, f.FlowID, f.HashType)
			}
		}
		for i := range b.Frames {
			b.Frames[i].FlowID, b.Frames[i].HashType, b.Frames[i].VLAN, b.Frames[i].HasVLAN = 99, 3, 5, true
		}
		b.Release()
	}
}
