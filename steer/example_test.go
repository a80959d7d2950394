package steer_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"maps"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// tcpFrame builds an Ethernet + IPv4 + TCP frame (no options, checksums
// left zero: steering never reads them) whose TCP sequence number is seq.
func tcpFrame(src, dst netip.Addr, sport, dport uint16, seq uint32) []byte {
	b := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(b[12:], 0x0800) // EtherType IPv4
	ip := b[14:]
	ip[0] = 0x45                                        // version 4, IHL 5
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip))) // total length
	ip[8], ip[9] = 64, 6                                // TTL, protocol TCP
	s, d := src.As4(), dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4 // data offset: 20 bytes
	return b
}

// Classify one frame, the ether_demux and rss_mbuf_software_hash_v4 steps: the
// flow key, the hash type (M_HASHTYPE_*) and the flowid. With the Microsoft
// key the flowid is the one in Microsoft's RSS verification table for this
// connection, and the one a NIC programmed with that key would compute.
func ExampleClassifier_Classify() {
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		log.Fatal(err)
	}
	cls, err := steer.NewClassifier(steer.HashConfig{Key: h.Key()})
	if err != nil {
		log.Fatal(err)
	}
	frame := tcpFrame(netip.MustParseAddr("66.9.149.187"), netip.MustParseAddr("161.142.100.80"), 2794, 1766, 1)

	var c steer.Classification
	cls.Classify(frame, &c)
	k := c.Key
	fmt.Printf("key: %s:%d > %s:%d proto %d\n", k.Src, k.SrcPort, k.Dst, k.DstPort, k.Proto)
	fmt.Printf("ethertype 0x%04x, reason %s\n", c.EtherType, c.Reason)
	fmt.Printf("hash type %s, flowid 0x%08x\n", c.HashType, c.FlowID)
	fmt.Printf("hashed bytes: % x\n", c.Tuple())
	// With 128 buckets, rss_getbucket keeps the low 7 bits.
	fmt.Printf("bucket %d of %d\n", c.FlowID&(steer.DefaultBuckets-1), steer.DefaultBuckets)
	// Output:
	// key: 66.9.149.187:2794 > 161.142.100.80:1766 proto 6
	// ethertype 0x0800, reason ok
	// hash type RSS_TCP_IPV4, flowid 0x51ccc178
	// hashed bytes: 42 09 95 bb a1 8e 64 50 0a ea 06 e6
	// bucket 120 of 128
}

// Steer a capture file over two workers. The embedded sample stands for a
// file: a program would call pcapfile.Open("trace.pcap"). A file can wait,
// so a full queue holds it back and nothing is dropped, and the Microsoft
// key makes the split between workers reproducible; with the
// default random key it changes from run to run, but every flow still stays
// on one worker.
func ExampleDispatcher_Run() {
	var perWorker [2]atomic.Uint64
	d, err := steer.New(steer.Config{Workers: 2, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}},
		func(p *steer.Packet) { perWorker[p.Worker].Add(1) })
	if err != nil {
		log.Fatal(err)
	}
	src, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if err := d.Run(context.Background(), src); err != nil {
		log.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil { // drains the queues
		log.Fatal(err)
	}

	s := d.Stats()
	fmt.Printf("frames %d, handled %d, dropped %d\n", s.Frames, s.Handled(), s.Dropped())
	for _, w := range s.Workstreams {
		fmt.Printf("worker %d: handled %d (handler saw %d)\n", w.Worker, w.Handled, perWorker[w.Worker].Load())
	}
	for _, r := range slices.Sorted(maps.Keys(s.Reasons)) {
		fmt.Printf("%s: %d\n", r, s.Reasons[r])
	}
	// Output:
	// frames 4623, handled 4623, dropped 0
	// worker 0: handled 2370 (handler saw 2370)
	// worker 1: handled 2253 (handler saw 2253)
	// ok: 4594
	// non-ip: 23
	// short-ethernet: 1
	// too-many-vlans: 1
	// bad-ihl: 2
	// short-ipv6: 1
	// short-transport: 1
}

// Give each worker a state of its own: the README's example. The state is
// made in its worker's goroutine and touched only there, so it needs no
// lock, and nothing is sized by a worker count; the states are read once
// Close has returned. A file can wait, so with the zero Config a full queue
// holds it back and nothing is dropped.
func ExampleNewPerWorker() {
	type counter struct {
		frames int
		flows  map[steer.FlowKey]int
	}
	d, states, err := steer.NewPerWorker(steer.Config{Workers: 2, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}},
		func(w *steer.Worker) *counter { return &counter{flows: map[steer.FlowKey]int{}} },
		func(c *counter, p *steer.Packet) {
			c.frames++
			c.flows[p.Key()]++
		})
	if err != nil {
		log.Fatal(err)
	}
	src, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if err := d.Run(context.Background(), src); err != nil {
		log.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	total := 0
	for i, c := range states {
		fmt.Printf("worker %d: %d frames, %d flows\n", i, c.frames, len(c.flows))
		total += c.frames
	}
	st := d.Stats()
	fmt.Printf("%d frames in, %d counted, %d dropped\n", st.Frames, total, st.Dropped())
	// Output:
	// worker 0: 2370 frames, 472 flows
	// worker 1: 2253 frames, 474 flows
	// 4623 frames in, 4623 counted, 0 dropped
}

// Read and reprogram the indirection table, the `ethtool -x` and `ethtool -X`
// of this library. FreeBSD's rss_init fills it round-robin; here it is
// reprogrammed to send every bucket to worker 1. The change never reorders a
// flow: a bucket's frames keep going to its old worker until that worker has
// handled the frames of the bucket already queued to it (the last_qtail
// rule), and only then does the bucket move. Stats.BucketMoves counts the
// moves: one per bucket that changed worker and carried frames afterwards.
func ExampleDispatcher_SetTable() {
	const conns = 8
	var (
		lastSeq [conns]atomic.Uint32 // per connection, the last frame handled
		onOne   [conns]atomic.Bool   // the connection has reached worker 1
		moved   atomic.Int32         // connections that have reached worker 1
		inOrder atomic.Bool
		phase2  atomic.Bool
	)
	inOrder.Store(true)
	handler := func(p *steer.Packet) {
		c := p.Key().SrcPort - 40000
		seq := binary.BigEndian.Uint32(p.Data[14+20+4:])
		if seq != lastSeq[c].Load()+1 {
			inOrder.Store(false)
		}
		lastSeq[c].Store(seq)
		if phase2.Load() && p.Worker == 1 && !onOne[c].Swap(true) {
			moved.Add(1)
		}
	}
	d, err := steer.New(steer.Config{Workers: 2, Buckets: 8, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}}, handler)
	if err != nil {
		log.Fatal(err)
	}
	before := d.Table()
	fmt.Println("table:", before)

	// Eight connections, a frame of each per Dispatch call.
	in := d.NewInput()
	client := netip.MustParseAddr("10.0.0.1")
	server := netip.MustParseAddr("192.0.2.80")
	frames := make([]steer.Frame, conns)
	seq := uint32(0)
	send := func() {
		seq++
		for i := range frames {
			frames[i] = steer.Frame{Data: tcpFrame(client, server, uint16(40000+i), 80, seq)}
		}
		if err := in.Dispatch(frames, nil); err != nil {
			log.Fatal(err)
		}
	}
	send()

	table := d.Table()
	for b := range table {
		table[b] = 1
	}
	if err := d.SetTable(table); err != nil {
		log.Fatal(err)
	}
	fmt.Println("table:", d.Table())
	phase2.Store(true)
	// Keep sending until every connection has reached worker 1 (bounded).
	for try := 0; try < 10000 && moved.Load() < conns; try++ {
		send()
		time.Sleep(100 * time.Microsecond)
	}
	if err := d.Close(context.Background()); err != nil {
		log.Fatal(err)
	}

	s := d.Stats()
	changed := 0 // buckets that were on worker 0 and carried frames
	for b, n := range s.BucketFrames {
		if n > 0 && before[b] == 0 {
			changed++
		}
	}
	fmt.Printf("every connection on worker 1: %v, in order: %v\n", moved.Load() == conns, inOrder.Load())
	fmt.Printf("bucket moves %d, buckets that changed worker and carried frames %d\n", s.BucketMoves, changed)
	fmt.Printf("every frame handled: %v\n", s.Frames == s.Handled() && s.Frames == uint64(conns)*uint64(seq))
	// Output:
	// table: [0 1 0 1 0 1 0 1]
	// table: [1 1 1 1 1 1 1 1]
	// every connection on worker 1: true, in order: true
	// bucket moves 2, buckets that changed worker and carried frames 2
	// every frame handled: true
}

// Receive flow steering (RFS), Linux's rps_sock_flow_table: the consumer of
// a flow records the worker it runs on with SetDesired, as a socket's
// recvmsg does with rps_record_sock_flow, and the dispatcher moves the flow
// there. Here the handler itself plays the consumer and asks, at the flow's
// first frame, for the other worker. The move waits until the old worker has
// handled every frame of the flow queued to it (Linux's last_qtail rule), so
// the flow is never reordered.
func ExampleDispatcher_SetDesired() {
	var (
		d        *steer.Dispatcher
		asked    atomic.Bool
		target   atomic.Int32
		lastSeq  atomic.Uint32
		inOrder  atomic.Bool
		firstW   atomic.Int32
		arrived  = make(chan struct{})
		notified atomic.Bool
	)
	inOrder.Store(true)
	handler := func(p *steer.Packet) {
		seq := binary.BigEndian.Uint32(p.Data[14+20+4:])
		if seq != lastSeq.Load()+1 {
			inOrder.Store(false)
		}
		lastSeq.Store(seq)
		if !asked.Swap(true) {
			firstW.Store(int32(p.Worker))
			target.Store(int32(1 - p.Worker))
			if err := d.SetDesired(p.FlowID, 1-p.Worker); err != nil {
				log.Print(err)
			}
		}
		if p.Worker == int(target.Load()) && asked.Load() && !notified.Swap(true) {
			close(arrived)
		}
	}
	var err error
	d, err = steer.New(steer.Config{Workers: 2, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}, RFS: steer.RFSConfig{Enabled: true}}, handler)
	if err != nil {
		log.Fatal(err)
	}

	// One connection, one frame per Dispatch call, until a frame reaches
	// the desired worker (a bounded number of tries).
	in := d.NewInput()
	client := netip.MustParseAddr("10.0.0.1")
	server := netip.MustParseAddr("192.0.2.80")
	moved := false
	for seq := uint32(1); seq <= 10000 && !moved; seq++ {
		f := []steer.Frame{{Data: tcpFrame(client, server, 40000, 80, seq)}}
		if err := in.Dispatch(f, nil); err != nil {
			log.Fatal(err)
		}
		select {
		case <-arrived:
			moved = true
		case <-time.After(100 * time.Microsecond):
		}
	}
	if err := d.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	s := d.Stats()
	fmt.Printf("flow started on worker %d and moved to worker %d: %v\n", firstW.Load(), target.Load(), moved)
	fmt.Printf("frames in order: %v\n", inOrder.Load())
	fmt.Printf("flow moves: %d\n", s.FlowMoves)
	// Output:
	// flow started on worker 0 and moved to worker 1: true
	// frames in order: true
	// flow moves: 1
}

// Read the stats, netstat -Q's columns, and print them the way netstat -Q
// does. DIRECT dispatch runs the handler in the caller's goroutine, so no
// queue forms (Len and WMark stay 0) and the counts are reproducible; with
// the default DEFERRED dispatch WMark depends on timing. Disp'd counts the
// frames handled inline on each workstream.
func ExampleStats_WriteReport() {
	d, err := steer.New(steer.Config{
		Workers:  2,
		Dispatch: steer.DispatchDirect,
		Hash:     steer.HashConfig{Key: hash.MicrosoftKey[:]},
	}, func(p *steer.Packet) {})
	if err != nil {
		log.Fatal(err)
	}
	src, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if err := d.Run(context.Background(), src); err != nil {
		log.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	s := d.Stats()
	fmt.Printf("every frame accounted for: %v\n\n", s.Frames == s.Handled()+s.Dropped()+s.Panicked())
	if err := s.WriteReport(os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// every frame accounted for: true
	//
	// Configuration:
	//                  Setting                      Current  Limit
	//             Thread count                            2      2
	//  Queue limit (drop/wait)                      256/512  10240
	//           Queue overflow                         auto    n/a
	//          Dispatch policy                       direct    n/a
	//          Steering policy                          rss    n/a
	//    Threads bound to CPUs                     disabled    n/a
	//      Indirection buckets                          128  65536
	//            Hash function                     toeplitz    n/a
	//   Hash key (fingerprint)                    microsoft    n/a
	//               Hash types  ipv4,tcp_ipv4,ipv6,tcp_ipv6    n/a
	//           Symmetric hash                     disabled    n/a
	//        Tunnels hashed by                        outer    n/a
	//                      RFS                     disabled    n/a
	//               Flow limit                     disabled    n/a
	//
	// Workstreams:
	//  WSID  CPU  Len  WMark  Disp'd  HDisp'd  QDrops  Queued  Handled
	//     0    -    0      0    2370        0       0       0     2370
	//     1    -    0      0    2253        0       0       0     2253
	//
	// Other drops and panics:
	//  WSID  Stalled  FlowLimit  Redisp  Close  Panicked
	//     0        0          0       0      0         0
	//     1        0          0       0      0         0
	//
	// Frames: 4623 in, 4623 handled, 0 dropped, 0 panicked; bucket moves 0, flow moves 0
	//
	// Classification (every frame in):
	//   ok               4594
	//   non-ip           23
	//   short-ethernet   1
	//   too-many-vlans   1
	//   bad-ihl          2
	//   short-ipv6       1
	//   short-transport  1
}
