package filter

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// batchSource hands out frames in batches of n, each with a Release that
// counts, and says it is live when live is set.
type batchSource struct {
	frames   []steer.Frame
	n        int
	live     bool
	out      int
	batches  atomic.Int64
	released atomic.Int64
	closed   bool
}

func (s *batchSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	b.Frames, b.Release = b.Frames[:0], nil
	if s.out >= len(s.frames) {
		return io.EOF
	}
	end := min(s.out+s.n, len(s.frames))
	b.Frames = append(b.Frames, s.frames[s.out:end]...)
	s.out = end
	s.batches.Add(1)
	b.Release = func() { s.released.Add(1) }
	return nil
}

func (s *batchSource) Close() error { s.closed = true; return nil }
func (s *batchSource) Live() bool   { return s.live }
func (s *batchSource) Backlog() (int, int) {
	return 3, 4
}

// statsSource is a batchSource with counters of its own.
type statsSource struct{ *batchSource }

func (s statsSource) SourceStats() (steer.SourceStats, error) {
	return steer.SourceStats{Name: "ring", Received: 7, Dropped: 1}, nil
}

func corpusFrames() ([]steer.Frame, []*pkt) {
	pk := corpus()
	frames := make([]steer.Frame, len(pk))
	for i, p := range pk {
		frames[i] = steer.Frame{Data: p.data}
	}
	return frames, pk
}

func program(t testing.TB, expr string) *Program {
	t.Helper()
	_, progs := testdata(t)
	p, err := Parse(progs[expr])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSourceThroughDispatcher steers a filtered source: the dispatcher
// sees exactly the accepted frames, in order, and the report counts the
// rejected ones as filtered, apart from handled and dropped; every batch
// is released.
func TestSourceThroughDispatcher(t *testing.T) {
	frames, pk := corpusFrames()
	const expr = "udp and not port 53"
	var wantIn []int
	for i, p := range pk {
		if want(expr, p) {
			wantIn = append(wantIn, i)
		}
	}
	src := &batchSource{frames: frames, n: 64}
	fs, err := NewSource(src, program(t, expr))
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	index := map[*byte]int{}
	for i, f := range frames {
		if len(f.Data) > 0 {
			index[&f.Data[0]] = i
		}
	}
	d, err := steer.New(steer.Config{Workers: 1, Dispatch: steer.DispatchDirect}, func(p *steer.Packet) {
		seen = append(seen, index[&p.Data[0]])
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background(), fs); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	filtered := uint64(len(frames) - len(wantIn))
	if st.Frames != uint64(len(wantIn)) || st.Handled() != st.Frames || st.Dropped() != 0 {
		t.Errorf("dispatcher: %d in, %d handled, %d dropped; want the %d accepted frames", st.Frames, st.Handled(), st.Dropped(), len(wantIn))
	}
	if len(st.Sources) != 1 || st.Sources[0].Filtered != filtered || st.Sources[0].Name != "filter" {
		t.Errorf("sources %+v, want one with %d filtered", st.Sources, filtered)
	}
	if fs.Filtered() != filtered || fs.Passed() != uint64(len(wantIn)) {
		t.Errorf("Filtered %d, Passed %d", fs.Filtered(), fs.Passed())
	}
	if len(seen) != len(wantIn) {
		t.Fatalf("handled %d frames, want %d", len(seen), len(wantIn))
	}
	for i := range seen {
		if seen[i] != wantIn[i] {
			t.Fatalf("frame %d handled is corpus frame %d, want %d: order or choice differs", i, seen[i], wantIn[i])
		}
	}
	if b, r := src.batches.Load(), src.released.Load(); b != r || b == 0 {
		t.Errorf("%d batches read, %d released", b, r)
	}
	var report strings.Builder
	if err := st.WriteReport(&report); err != nil {
		t.Fatal(err)
	}
	if want := "filtered " + strconv.FormatUint(filtered, 10); !strings.Contains(report.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, report.String())
	}
	if err := fs.Close(); err != nil || !src.closed {
		t.Errorf("Close: %v, source closed %v", err, src.closed)
	}
}

// TestSourceSkipsEmptyBatches: batches whose frames are all rejected are
// released at once and never returned empty.
func TestSourceSkipsEmptyBatches(t *testing.T) {
	frames, pk := corpusFrames()
	// One frame a batch: most batches hold a frame icmp rejects.
	src := &batchSource{frames: frames, n: 1}
	fs, err := NewSource(src, program(t, "icmp"))
	if err != nil {
		t.Fatal(err)
	}
	var b steer.Batch
	var got, empty int
	for {
		err := fs.ReadBatch(context.Background(), &b)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Frames) == 0 {
			empty++
		}
		got += len(b.Frames)
		b.Release()
	}
	want := 0
	for _, p := range pk {
		if predicates["icmp"](p) && !p.runt {
			want++
		}
	}
	if got != want || empty != 0 {
		t.Errorf("%d frames in batches (%d empty batches), want %d and none empty", got, empty, want)
	}
	if b, r := src.batches.Load(), src.released.Load(); b != r || b != int64(len(frames)) {
		t.Errorf("%d batches read, %d released, of %d", b, r, len(frames))
	}
}

// TestSourceSnapLen: a program's return value cuts the frame; the wire
// length stays.
func TestSourceSnapLen(t *testing.T) {
	p, err := Parse("{ 0x6, 0, 0, 20 }")
	if err != nil {
		t.Fatal(err)
	}
	src := &batchSource{frames: []steer.Frame{{Data: make([]byte, 100)}, {Data: make([]byte, 10)}, {Data: make([]byte, 60), WireLen: 1514}}, n: 8}
	fs, _ := NewSource(src, p)
	var b steer.Batch
	if err := fs.ReadBatch(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]int{{20, 100}, {10, 10}, {20, 1514}} {
		f := b.Frames[i]
		if len(f.Data) != want[0] || cap(f.Data) != want[0] || f.WireLen != want[1] {
			t.Errorf("frame %d: %d bytes (cap %d), wire %d; want %d, %d", i, len(f.Data), cap(f.Data), f.WireLen, want[0], want[1])
		}
	}
}

// TestSourcePassesThrough: Live, Backlog and the source's own counters
// come through the filter.
func TestSourcePassesThrough(t *testing.T) {
	p := program(t, "ip6")
	for _, live := range []bool{false, true} {
		fs, _ := NewSource(&batchSource{live: live}, p)
		if fs.Live() != live {
			t.Errorf("Live() = %v, want %v", fs.Live(), live)
		}
		if used, size := fs.Backlog(); used != 3 || size != 4 {
			t.Errorf("Backlog() = %d, %d, want the source's 3, 4", used, size)
		}
	}
	frames, _ := corpusFrames()
	fs, _ := NewSource(statsSource{&batchSource{frames: frames, n: 64}}, p)
	var b steer.Batch
	for fs.ReadBatch(context.Background(), &b) == nil {
		b.Release()
	}
	st, err := fs.SourceStats()
	if err != nil || st.Name != "ring" || st.Received != 7 || st.Dropped != 1 || st.Filtered != fs.Filtered() || st.Filtered == 0 {
		t.Errorf("SourceStats %+v, %v; want the ring's counters and %d filtered", st, err, fs.Filtered())
	}
}

// TestSourceContext: a source that keeps delivering frames the program
// rejects does not hold the reader once ctx ends.
func TestSourceContext(t *testing.T) {
	frames, _ := corpusFrames()
	src := &steer.SliceSource{Frames: frames[len(frames)-3:], Loops: -1} // runts: all rejected
	fs, _ := NewSource(src, program(t, "ip6"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b steer.Batch
	if err := fs.ReadBatch(ctx, &b); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadBatch after cancel: %v", err)
	}
}

func TestSourceAllocs(t *testing.T) {
	frames, _ := corpusFrames()
	src := &steer.SliceSource{Frames: frames, Loops: -1}
	fs, _ := NewSource(src, program(t, "tcp port 80"))
	var b steer.Batch
	ctx := context.Background()
	fs.ReadBatch(ctx, &b)
	if n := testing.AllocsPerRun(100, func() { fs.ReadBatch(ctx, &b) }); n != 0 {
		t.Errorf("%v allocations per ReadBatch", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	frames, _ := corpusFrames()
	for _, expr := range []string{"tcp port 80", "udp and not port 53", "ip6 and tcp port 80 or udp"} {
		p := program(b, expr)
		b.Run(strings.ReplaceAll(expr, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p.Match(frames[i%len(frames)].Data)
			}
		})
	}
}
