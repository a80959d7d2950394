// Command flowmeter counts packets, bytes and duration per connection, each
// worker keeping the connections it handles in a table of its own, with no
// lock anywhere.
//
//	go run ./examples/flowmeter                  # the sample capture
//	go run ./examples/flowmeter -r trace.pcap
//
// It teaches per-worker state. The dispatcher hands every frame of a flow to
// one worker, in order, so a worker may keep per-flow records that no other
// goroutine touches. steer.NewPerWorker makes each worker's state, a meter,
// in the worker's goroutine and passes it to the handler with every packet;
// the meter keeps its records in a flowtable.Table, whose memory is fixed
// when it is made (a flood of new flows ends the least recently seen
// records early, as "evicted", instead of growing it). Hash.Symmetric puts
// both directions of a connection on one worker, and FlowKey.Canonical
// gives them one key, so a connection is one record.
//
// It also teaches expiry by capture time. A file is replayed in
// milliseconds, so a wall clock would never see a connection go idle; the
// table is given each frame's capture time instead (Lookup ends what has
// been idle for longer than Config.Idle by then, and a frame after such a
// gap starts a new record), and the worker's tick (steer.Ticker) passes
// the latest capture time the worker has handled. The records so do not
// depend on how fast the file is read, nor on how many workers read it.
//
// Look at meter and its count method (the handler), Tick, and how run reads
// the meters once Dispatcher.Close has returned.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/flowtable"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

const (
	idle     = 30 * time.Second // a connection with no frame for this long (capture time) has ended
	capacity = 1 << 16          // open connections a worker holds at most
	top      = 10               // connections printed
)

// record is one connection's meter, from its first frame until it ends.
type record struct {
	key         steer.FlowKey // canonical: both directions have this key
	packets     [2]uint64     // frames from key.Src, and from key.Dst
	bytes       uint64        // their lengths on the wire
	first, last time.Time     // capture times
	end         string        // how it ended: expired, evicted, or open at the end
}

// summary adds up ended records, keeping only the busiest, so that memory
// does not grow with the number of connections a capture holds.
type summary struct {
	ends    map[string]int // records by how they ended
	packets uint64
	top     []record // the busiest, by busiest
}

func (s *summary) add(r record) {
	s.ends[r.end]++
	s.packets += r.packets[0] + r.packets[1]
	s.top = append(s.top, r)
	slices.SortFunc(s.top, busiest)
	s.top = s.top[:min(len(s.top), top)]
}

// busiest orders records by packets, most first, then by start and key, so
// that the top list does not depend on the order records end in.
func busiest(a, b record) int {
	return cmp.Or(cmp.Compare(b.packets[0]+b.packets[1], a.packets[0]+a.packets[1]),
		a.first.Compare(b.first), a.key.Src.Compare(b.key.Src), cmp.Compare(a.key.SrcPort, b.key.SrcPort))
}

// meter is one worker's state. Only the worker's goroutine touches it
// while the dispatcher runs: the handler and Tick both run there.
type meter struct {
	flows *flowtable.Table[steer.FlowKey, record]
	clock time.Time // the latest capture time this worker has handled
	summary
}

func newMeter(*steer.Worker) *meter {
	m := &meter{summary: summary{ends: map[string]int{}}}
	var err error
	m.flows, err = flowtable.New(flowtable.Config[steer.FlowKey, record]{
		Capacity: capacity,
		Idle:     idle,
		OnEvict: func(_ flowtable.Flow[steer.FlowKey], r *record, why flowtable.Reason) {
			r.end = why.String()
			m.add(*r)
		},
	})
	if err != nil {
		panic(err) // cannot happen: the configuration is constant and valid
	}
	return m
}

// count is the handler: it adds frame p to its connection's record.
func (m *meter) count(p *steer.Packet) {
	if p.Timestamp.After(m.clock) {
		m.clock = p.Timestamp
	}
	k, fromDst := p.Key().Flow().Canonical()
	// The table finds a record by its flowid and confirms it by its key.
	// UDP's and fragments' flowids hash the addresses only (the default
	// hash types), so all such flows between two hosts share one, and a
	// flowid holds at most 16 flows: mix the ports in.
	id := p.FlowID ^ uint32(k.SrcPort)<<16 ^ uint32(k.DstPort)
	r, isNew := m.flows.Lookup(id, k, p.Timestamp)
	if isNew {
		*r = record{key: k, first: p.Timestamp}
	}
	dir := 0
	if fromDst {
		dir = 1
	}
	r.packets[dir]++
	r.bytes += uint64(p.WireLen)
	r.last = p.Timestamp
}

// Tick implements steer.Ticker: it ends the records idle by the worker's
// capture clock, for a worker whose traffic has stopped. Its argument, the
// wall clock, would suit a live capture.
func (m *meter) Tick(time.Time) { m.flows.Expire(m.clock) }

// result is what a run measured.
type result struct {
	summary
	frames  uint64 // frames the dispatcher handled
	workers int
}

// run meters the capture file name (the sample when name is empty) over
// workers workers (0: one per CPU).
func run(name string, workers int) (*result, error) {
	f, err := sample.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := pcapfile.NewReader(f)
	if err != nil {
		return nil, err
	}
	cfg := steer.Config{Workers: workers, Hash: steer.HashConfig{Symmetric: true}}
	d, meters, err := steer.NewPerWorker(cfg, newMeter, (*meter).count)
	if err != nil {
		return nil, err
	}
	runErr := d.Run(context.Background(), src)
	if err := d.Close(context.Background()); err != nil {
		return nil, err
	}
	if runErr != nil {
		return nil, runErr
	}
	// The workers have exited: the meters may be read now. What is still
	// open has ended idle if it was idle at the end of the capture.
	var end time.Time
	for _, m := range meters {
		if m.clock.After(end) {
			end = m.clock
		}
	}
	st := d.Stats()
	res := &result{summary: summary{ends: map[string]int{}}, frames: st.Handled(), workers: len(meters)}
	for _, m := range meters {
		m.flows.Expire(end)
		for _, r := range m.flows.All() {
			r.end = "open"
			m.add(*r)
		}
		for end, n := range m.ends {
			res.ends[end] += n
		}
		res.packets += m.packets
		res.top = append(res.top, m.top...)
	}
	slices.SortFunc(res.top, busiest)
	res.top = res.top[:min(len(res.top), top)]
	return res, nil
}

var protos = map[uint8]string{1: "icmp", 6: "tcp", 17: "udp", 58: "icmp6"}

func (r *result) print(w io.Writer) {
	fmt.Fprintf(w, "%d frames, %d in connection records on %d workers: %d expired, %d evicted, %d open at the end\n\n",
		r.frames, r.packets, r.workers, r.ends["expired"], r.ends["evicted"], r.ends["open"])
	fmt.Fprintf(w, "%8s %8s %10s %10s  %s\n", "a > b", "b > a", "bytes", "duration", "a <> b")
	for _, rec := range r.top {
		k := rec.key
		conn := "non-IP"
		if k.Src.IsValid() {
			conn = fmt.Sprintf("%v <> %v %s", netip.AddrPortFrom(k.Src, k.SrcPort), netip.AddrPortFrom(k.Dst, k.DstPort),
				cmp.Or(protos[k.Proto], fmt.Sprint("proto ", k.Proto)))
		}
		fmt.Fprintf(w, "%8d %8d %10d %10v  %s\n", rec.packets[0], rec.packets[1], rec.bytes, rec.last.Sub(rec.first).Round(time.Millisecond), conn)
	}
}

func main() {
	file := flag.String("r", "", "capture `file` to read (pcap or pcapng); default: the sample capture")
	workers := flag.Int("workers", 0, "`number` of workers (0: one per CPU)")
	flag.Parse()
	res, err := run(*file, *workers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flowmeter:", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
}
