package main

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/rpsgo/rps/flowtable"
	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/steer"
)

// The flow records: each worker keeps the flows it handles in a bounded
// flowtable.Table of its own, a record per flow from its first frame until
// the flow ends, as a NetFlow exporter's cache does. A flow ends when it
// has had no frame for -idle of capture time (the idle timeout), when it
// has lasted -active (the active timeout: its next frame starts a new
// record), when its worker's table is full and it is the least recently
// seen (ended early, for lack of room), or with the capture. The clock is
// the frames' capture times, so a capture replayed in a second ends its
// flows where they ended when it was recorded. An ended record is counted,
// and with -flows written as a CSV row then: memory stays bounded by the
// tables, however many flows the capture holds, and nothing is lost, a
// long or crowded-out flow only split in time.

// flowConfig is the flow records' configuration, from the flags.
type flowConfig struct {
	capacity  int           // -flow-table: the flows all the workers' tables hold at once
	workers   int           // how many tables share it
	idle      time.Duration // -idle
	active    time.Duration // -active; 0: none
	symmetric bool          // -symmetric: a record per connection, keyed by FlowKey.Canonical
}

// perWorker is the capacity of one worker's table.
func (c flowConfig) perWorker() int { return max(1, (c.capacity+c.workers-1)/c.workers) }

// flowRecord is one flow's record in a worker's table; its key is the
// table's.
type flowRecord struct {
	first, last   int64 // capture times of its first and last frames, Unix nanoseconds
	frames, bytes uint64
	flowid        uint32
	hashType      hash.HashType
	// reversed says that the record's first frame went from the key's Dst
	// to its Src: with -symmetric the key is the canonical one, and the
	// row names the endpoints as the first frame did.
	reversed bool
}

// ending says why a record ended.
type ending uint8

const (
	endCapture ending = iota // open when the capture ended
	endIdle                  // no frame for -idle
	endActive                // lasted -active
	endEarly                 // evicted from a full table (or a crowded bucket)
	numEndings
)

var endingNames = [numEndings]string{endCapture: "end", endIdle: "idle", endActive: "active", endEarly: "early"}

// flowTable is one worker's flow records, a part of its workerTally. Flows
// with neither VLAN tags nor encapsulations, most traffic, are in a table
// keyed by a plainKey, the others in one keyed by the whole steer.FlowKey:
// a plain flow's slot is a third the size, holds no pointer for the
// garbage collector to follow, and its key is compared in one cache line,
// which makes a replay of plain traffic about a tenth faster.
type flowTable struct {
	plain     *flowtable.Table[plainKey, flowRecord]      // nil until the first plain flow
	full      *flowtable.Table[steer.FlowKey, flowRecord] // nil until the first other flow
	cfg       flowConfig
	line      [delay]pending // the delay line: frames counted, not yet in their records
	next      int            // the slot of line the next frame takes, modulo delay
	queued    int            // frames pending
	active    int64          // -active in nanoseconds; 0: none
	symmetric bool           // key records by FlowKey.Canonical
	clock     time.Time      // the latest capture time this worker handled
	ended     [numEndings]uint64
	worker    int
	// buckets is the indirection table's size, for the rows' bucket
	// column. run sets it once the dispatcher has normalized its
	// configuration, before the first frame: a worker reads it only for
	// records, which frames start, and frames reach it through the
	// dispatcher's queues, which order the write before the reads.
	buckets *int
	out     *flowWriter // nil without -flows
	buf     []byte      // rows not yet handed to out
	rows    int         // the rows in buf
}

// flushAt is how many bytes of rows a worker formats before it hands them
// to the -flows writer, taking its lock once for all of them.
const flushAt = 64 << 10

func (t *flowTable) init(worker int, cfg flowConfig, out *flowWriter, buckets *int) {
	t.worker, t.out, t.buckets, t.symmetric, t.cfg = worker, out, buckets, cfg.symmetric, cfg
	t.active = int64(cfg.active)
	if out != nil {
		t.buf = make([]byte, 0, flushAt+1024)
	}
}

// plainTable returns the table of plain flows, made at its first flow:
// a capture of tunnels alone never allocates it, nor one of plain
// traffic the other.
func (t *flowTable) plainTable() *flowtable.Table[plainKey, flowRecord] {
	if t.plain == nil {
		t.plain = mustTable(t.cfg, func(f flowtable.Flow[plainKey], r *flowRecord, why flowtable.Reason) {
			t.endPlain(&f.Key, r, endingFor(why))
		})
	}
	return t.plain
}

// fullTable returns the table of the other flows, made at its first flow.
func (t *flowTable) fullTable() *flowtable.Table[steer.FlowKey, flowRecord] {
	if t.full == nil {
		t.full = mustTable(t.cfg, func(f flowtable.Flow[steer.FlowKey], r *flowRecord, why flowtable.Reason) {
			t.end(&f.Key, r, endingFor(why))
		})
	}
	return t.full
}

// mustTable makes a worker's table. parseFlags bounds -flow-table so that
// flowtable.New cannot refuse it.
func mustTable[K comparable](cfg flowConfig, onEvict func(flowtable.Flow[K], *flowRecord, flowtable.Reason)) *flowtable.Table[K, flowRecord] {
	tb, err := flowtable.New(flowtable.Config[K, flowRecord]{Capacity: cfg.perWorker(), Idle: cfg.idle, OnEvict: onEvict})
	if err != nil {
		panic(fmt.Sprintf("-flow-table %d: %v", cfg.capacity, err))
	}
	return tb
}

// delay is how many frames a worker's delay line holds (a power of two):
// each frame's flow is prefetched in two steps, its table bucket when it
// arrives and its slot delay/2 frames later, and looked up delay frames
// later, so that the cache misses of several lookups overlap.
const delay = 16

// pending is a frame counted but not yet added to its record.
type pending struct {
	key      steer.FlowKey // the flow's key, when not plain
	pk       plainKey      // the flow's key, when plain
	plain    bool
	reversed bool // with -symmetric: the frame went from the canonical key's Dst to its Src
	hashType hash.HashType
	id       uint32 // the slot id (slotID)
	flowid   uint32
	length   int
	ts       time.Time
}

// count adds frame p, of flow key k, to its record: it names the flow's
// bucket to the CPU now (flowtable's PrefetchBucket), its slot delay/2
// frames later (Prefetch, which reads the bucket), and adds the frame
// delay frames later, when the slot is in the cache (or at the next tick
// or at Close, which apply every frame pending).
func (t *flowTable) count(k *steer.FlowKey, p *steer.Packet) {
	e := &t.line[t.next&(delay-1)]
	if t.queued == delay {
		t.apply(e) // the oldest frame pending, whose slot e is
	} else {
		t.queued++
	}
	t.next++
	e.reversed = false
	if t.symmetric {
		*k, e.reversed = k.Canonical()
	}
	e.hashType, e.flowid, e.length, e.ts = p.HashType, p.FlowID, p.WireLen, p.Timestamp
	if e.ts.After(t.clock) {
		t.clock = e.ts
	}
	e.plain = e.pk.set(k)
	if e.plain {
		e.id = slotID(p.FlowID, k, false)
		t.plainTable().PrefetchBucket(e.id)
	} else {
		e.key, e.id = *k, slotID(p.FlowID, k, true)
		t.fullTable().PrefetchBucket(e.id)
	}
	if t.queued > delay/2 { // the frame delay/2 back: its bucket is in the cache now
		if m := &t.line[(t.next-1-delay/2)&(delay-1)]; m.plain {
			t.plainTable().Prefetch(m.id)
		} else {
			t.fullTable().Prefetch(m.id)
		}
	}
}

// drain adds every frame pending to its record.
func (t *flowTable) drain() {
	for ; t.queued > 0; t.queued-- {
		t.apply(&t.line[(t.next-t.queued)&(delay-1)])
	}
}

// apply adds frame e to its record.
func (t *flowTable) apply(e *pending) {
	var r *flowRecord
	var isNew bool
	if e.plain {
		r, isNew = t.plain.Lookup(e.id, e.pk, e.ts)
	} else {
		r, isNew = t.full.Lookup(e.id, e.key, e.ts)
	}
	ns := e.ts.UnixNano()
	if !isNew && t.active > 0 && ns-r.first >= t.active {
		if e.plain {
			t.endPlain(&e.pk, r, endActive)
		} else {
			t.end(&e.key, r, endActive)
		}
		isNew = true
	}
	if isNew {
		*r = flowRecord{first: ns, flowid: e.flowid, hashType: e.hashType, reversed: e.reversed}
	}
	r.frames++
	r.bytes += uint64(e.length)
	r.last = ns
}

// endPlain is end for a plain flow's record: the FlowKey is rebuilt only
// for a row.
func (t *flowTable) endPlain(pk *plainKey, r *flowRecord, why ending) {
	if t.out == nil {
		t.ended[why]++
		return
	}
	k := pk.flowKey()
	t.end(&k, r, why)
}

// end counts a record that ended and, with -flows, formats its row.
func (t *flowTable) end(k *steer.FlowKey, r *flowRecord, why ending) {
	t.ended[why]++
	if t.out == nil {
		return
	}
	t.buf = appendRow(t.buf, k, r, t.worker, *t.buckets, why)
	t.rows++
	if len(t.buf) >= flushAt {
		t.flush()
	}
}

// tick adds the frames pending, ends the flows idle by the worker's
// capture clock, and hands the rows formatted so far to the writer.
func (t *flowTable) tick() {
	t.drain()
	if t.plain != nil {
		t.plain.Expire(t.clock)
	}
	if t.full != nil {
		t.full.Expire(t.clock)
	}
	t.flush()
}

// flush hands the rows formatted so far to the writer.
func (t *flowTable) flush() {
	if t.rows > 0 {
		t.out.write(t.buf, t.rows)
		t.buf, t.rows = t.buf[:0], 0
	}
}

// records returns how many records the worker ended.
func (t *flowTable) records() uint64 {
	var n uint64
	for _, c := range t.ended {
		n += c
	}
	return n
}

// endOpen ends every record still open when the capture ended, at end,
// the latest capture time any worker handled: as idle if it had no frame
// for longer than -idle before it (a worker's own clock stops with its
// traffic), else as open at the end. It runs after Dispatcher.Close,
// worker after worker, so that the rows written last come in a fixed
// order.
func (t *flowTable) endOpen(end time.Time) {
	idle := end.UnixNano() - int64(t.cfg.idle)
	why := func(r *flowRecord) ending {
		if r.last < idle {
			return endIdle
		}
		return endCapture
	}
	if t.plain != nil {
		for f, r := range t.plain.All() {
			t.endPlain(&f.Key, r, why(r))
		}
	}
	if t.full != nil {
		for f, r := range t.full.All() {
			t.end(&f.Key, r, why(r))
		}
	}
	if t.out != nil {
		t.flush()
	}
}

// slotID is the id a flow is filed under in its table: the flowid with the
// ports and protocol mixed in, and for a key with VLAN tags or
// encapsulations their IDs too. The flowid alone will not do: a 2-tuple
// hash (UDP's by default, fragments') gives every flow between two hosts
// one flowid, frames without a hash share flowid 0, and a flowtable
// bucket holds at most 16 flows, which would crowd each other out. The
// record keeps the flowid itself.
func slotID(flowid uint32, k *steer.FlowKey, full bool) uint32 {
	x := uint64(k.SrcPort)<<24 | uint64(k.DstPort)<<8 | uint64(k.Proto)
	if full {
		for _, id := range k.VLANs[:min(k.NVLAN, steer.MaxVLANDepth)] {
			x = x*31 + uint64(id)
		}
		for _, e := range k.Encaps[:min(k.NEncap, steer.MaxEncaps)] {
			x = x*31 + (uint64(e.Kind)<<32 | uint64(e.ID))
		}
	}
	return flowid ^ uint32(x*0x9E3779B97F4A7C15>>32)
}

// endingFor names the end of a record the table removed by itself.
func endingFor(why flowtable.Reason) ending {
	if why == flowtable.Expired {
		return endIdle
	}
	return endEarly
}

// plainKey is a steer.FlowKey with no VLAN tag and no encapsulation, in
// 38 bytes: the addresses in 16 bytes each (an IPv4 address in the last
// four) and their families in flags, so that it converts back to the very
// same FlowKey.
type plainKey struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
	flags        uint8 // plainSrc4 ... plainFragment
}

const (
	plainSrc4 = 1 << iota // Src is an IPv4 address
	plainSrc6             // Src is an IPv6 address (IPv4-mapped ones too)
	plainDst4
	plainDst6
	plainFragment
)

// set makes pk k's plainKey and reports whether k is plain: false when k
// has VLAN tags or encapsulations (or an address with a zone, which no
// frame gives). It writes pk's fields in place: a plainKey built apart and
// copied would be read back, 16 bytes at a time, from the two 8-byte
// stores of each address, which stalls the copy.
func (pk *plainKey) set(k *steer.FlowKey) bool {
	if k.NVLAN != 0 || k.NEncap != 0 || k.Depth != 0 || k.Src.Zone() != "" || k.Dst.Zone() != "" {
		return false
	}
	if k.Src.Is4() && k.Dst.Is4() {
		// Four bytes each, stored and later read whole (As16 would
		// build 16 bytes from two 8-byte stores and reload them).
		pk.src, pk.dst = [16]byte{}, [16]byte{}
		*(*[4]byte)(pk.src[12:]), *(*[4]byte)(pk.dst[12:]) = k.Src.As4(), k.Dst.As4()
		pk.flags = plainSrc4 | plainDst4
	} else {
		pk.src, pk.dst = k.Src.As16(), k.Dst.As16()
		pk.flags = family(k.Src, plainSrc4, plainSrc6) | family(k.Dst, plainDst4, plainDst6)
	}
	pk.sport, pk.dport, pk.proto = k.SrcPort, k.DstPort, k.Proto
	if k.Fragment {
		pk.flags |= plainFragment
	}
	return true
}

func family(a netip.Addr, v4, v6 uint8) uint8 {
	switch {
	case a.Is4():
		return v4
	case a.Is6():
		return v6
	}
	return 0
}

// flowKey returns the FlowKey k stands for.
func (k plainKey) flowKey() steer.FlowKey {
	return steer.FlowKey{Src: addrOf(k.src, k.flags&plainSrc4 != 0, k.flags&plainSrc6 != 0),
		Dst:     addrOf(k.dst, k.flags&plainDst4 != 0, k.flags&plainDst6 != 0),
		SrcPort: k.sport, DstPort: k.dport, Proto: k.proto, Fragment: k.flags&plainFragment != 0}
}

func addrOf(b [16]byte, v4, v6 bool) netip.Addr {
	switch {
	case v4:
		return netip.AddrFrom4([4]byte(b[12:]))
	case v6:
		return netip.AddrFrom16(b)
	}
	return netip.Addr{}
}

// flowsHeader is the -flows CSV's header row.
var flowsHeader = []string{"src", "dst", "sport", "dport", "proto", "hashtype", "flowid", "bucket", "worker",
	"packets", "bytes", "encap", "first", "last", "ended"}

// appendRow appends the CSV row of record r of flow k to b. No field needs
// quoting: addresses, numbers, names and encapsulations hold no comma,
// quote or line break.
func appendRow(b []byte, k *steer.FlowKey, r *flowRecord, worker, buckets int, why ending) []byte {
	src, dst, sport, dport := k.Src, k.Dst, k.SrcPort, k.DstPort
	if r.reversed {
		src, dst, sport, dport = dst, src, dport, sport
	}
	if src.IsValid() {
		b = src.AppendTo(b)
		b = append(b, ',')
		b = dst.AppendTo(b)
		b = append(b, ',')
	} else {
		b = append(b, ",,"...)
	}
	b = strconv.AppendUint(b, uint64(sport), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(dport), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(k.Proto), 10)
	b = append(b, ',')
	b = append(b, r.hashType.String()...)
	b = append(b, ",0x"...)
	for sh := 28; sh >= 0; sh -= 4 {
		b = append(b, "0123456789abcdef"[r.flowid>>sh&0xf])
	}
	b = append(b, ',')
	if r.hashType.IsHash() {
		b = strconv.AppendUint(b, uint64(r.flowid)&uint64(buckets-1), 10)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(worker), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, r.frames, 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, r.bytes, 10)
	b = append(b, ',')
	if k.NVLAN != 0 || k.NEncap != 0 {
		b = append(b, k.Encapsulation()...)
	}
	b = append(b, ',')
	b = time.Unix(0, r.first).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, ',')
	b = time.Unix(0, r.last).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, ',')
	b = append(b, endingNames[why]...)
	return append(b, '\n')
}

// flowWriter writes the -flows CSV: the workers hand it rows as their
// records end, in chunks, under its lock.
type flowWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	file *capture.OutFile // nil for standard output
	name string
	rows uint64
	err  error // the first error writing met; nothing is written after it
}

// createFlows creates the -flows file, or writes to stdout for "-", and
// writes the header row: before the steering, so that a path that cannot
// be written fails at once.
func createFlows(path string, stdout io.Writer) (*flowWriter, error) {
	fw := &flowWriter{name: "standard output"}
	out := stdout
	if path != "-" {
		f, err := capture.CreateOutFile(path, "-flows")
		if err != nil {
			return nil, err
		}
		fw.file, fw.name, out = f, path, f
	}
	fw.w = bufio.NewWriterSize(out, 256<<10)
	var hdr []byte
	for i, h := range flowsHeader {
		if i > 0 {
			hdr = append(hdr, ',')
		}
		hdr = append(hdr, h...)
	}
	fw.write(append(hdr, '\n'), 0)
	return fw, nil
}

// write writes rows, a chunk of n whole rows. It may be called from any
// goroutine.
func (fw *flowWriter) write(rows []byte, n int) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return
	}
	if _, err := fw.w.Write(rows); err != nil {
		fw.err = err
		return
	}
	fw.rows += uint64(n)
}

// abort closes the file, writing nothing more, for a run that fails
// before it steers anything: a file -flows created is removed, one that
// existed is left as it was; nil-safe.
func (fw *flowWriter) abort() {
	if fw == nil {
		return
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.w.Reset(io.Discard)
	if fw.file != nil {
		fw.file.Abort()
		fw.file = nil
	}
}

// close flushes the rows and closes the file. Its error is the first one
// writing met.
func (fw *flowWriter) close() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	err := fw.err
	if err == nil {
		err = fw.w.Flush()
	}
	if fw.file != nil {
		if cerr := fw.file.Close(); err == nil {
			err = cerr
		}
		if cerr := fw.file.Commit(); err == nil {
			err = cerr
		}
		fw.file = nil
	}
	if err != nil {
		return fmt.Errorf("writing flows to %s: %w", fw.name, err)
	}
	return nil
}
