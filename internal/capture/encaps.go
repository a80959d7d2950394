package capture

import (
	"cmp"
	"fmt"
	"github.com/rpsgo/rps/internal/wire"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/rpsgo/rps/steer"
)

// IP protocols that carry a tunnel the classifier opens with TunnelsInner.
const (
	protoIPIP = 4  // IPv4 in IP
	protoGRE  = 47 // GRE, and ERSPAN inside it
	protoIPv6 = 41 // IPv6 in IP
	protoUDP  = 17
)

// EncapCounter counts the frames of a run by the encapsulations the
// classifier walked, for the report's "Frames handled, by encapsulation" and the
// JSON report's encapsulations. One is shared by every worker (it holds
// only what does not change); each worker counts into a tally of its own
// (NewTally), with no lock, and the tallies are merged once the workers
// are done.
//
// With TunnelsOuter the classifier leaves tunnels closed, so the key
// cannot say that a frame is tunnelled. A frame whose key could be a
// tunnel's carrier (IP in IP, GRE, or UDP to a tunnel port, not a
// fragment) is classified once more with TunnelsInner, and counted as left
// closed when that finds a flow inside: the run then says how many frames
// -tunnels inner would spread. Plain traffic pays nothing for it.
type EncapCounter struct {
	tunnels steer.TunnelMode
	ports   []uint16          // the UDP tunnel ports
	probe   *steer.Classifier // TunnelsInner; nil when the run opens tunnels itself
}

// NewEncapCounter returns a counter for a run that hashes as hc does.
func NewEncapCounter(hc steer.HashConfig) (*EncapCounter, error) {
	c := &EncapCounter{tunnels: hc.Tunnels}
	if hc.Tunnels == steer.TunnelsInner {
		return c, nil
	}
	probe, err := steer.NewClassifier(steer.HashConfig{Tunnels: steer.TunnelsInner, VXLANPorts: hc.VXLANPorts})
	if err != nil {
		return nil, fmt.Errorf("capture: counting encapsulations: %w", err)
	}
	c.probe = probe
	c.ports = append([]uint16{wire.GENEVEPort, wire.GTPUPort, wire.MPLSUDPPort}, hc.VXLANPorts...)
	if hc.VXLANPorts == nil {
		c.ports = append(c.ports, steer.VXLANPort)
	}
	return c, nil
}

// NewTally returns a tally for one worker.
func (c *EncapCounter) NewTally() *EncapTally {
	return &EncapTally{c: c, counts: EncapCounts{tunnels: c.tunnels}}
}

// EncapTally is one worker's counts. Use it from one goroutine at a time.
type EncapTally struct {
	c       *EncapCounter
	scratch steer.Classification
	counts  EncapCounts
}

// Add counts one frame: its bytes (for the check with TunnelsOuter), its
// key and its length on the wire. With TunnelsOuter a frame that carries a
// tunnel is counted under the stack TunnelsInner would walk, marked as not
// opened, never as plain.
func (t *EncapTally) Add(data []byte, k *steer.FlowKey, length int) {
	n := &t.counts
	n.frames++
	s, depth := stackOf(k)
	var seen [4]uint64 // the kinds counted for this frame, one bit each
	for _, kind := range s[:depth] {
		if w, bit := kind>>6, uint64(1)<<(kind&63); seen[w]&bit == 0 {
			seen[w] |= bit
			n.kinds[kind]++
		}
	}
	if k.Depth > 0 {
		n.decapsulated++
	}
	if t.c.probe != nil && t.c.carrier(k) {
		t.c.probe.Classify(data, &t.scratch)
		ik := &t.scratch.Key
		tunnel := steer.EncapNone
		for _, e := range ik.Encaps[:min(int(ik.NEncap), steer.MaxEncaps)] {
			if e.Kind.Tunnel() {
				tunnel = e.Kind
				break
			}
		}
		if tunnel != steer.EncapNone {
			if ik.Depth > 0 {
				n.closed++
				n.closedKinds[tunnel]++
			}
			is, _ := stackOf(ik)
			n.stack(&n.notOpened, is).add(length)
			return
		}
	}
	if depth == 0 {
		n.plain.add(length)
	} else {
		n.stack(&n.stacks, s).add(length)
	}
}

// stackOf returns the kinds of k's encapsulations, outermost first, and
// how many there are.
func stackOf(k *steer.FlowKey) (s encapStack, n int) {
	for range min(int(k.NVLAN), steer.MaxVLANDepth) {
		s[n] = steer.EncapVLAN
		n++
	}
	for _, e := range k.Encaps[:min(int(k.NEncap), steer.MaxEncaps)] {
		s[n] = e.Kind
		n++
	}
	return s, n
}

// carrier reports whether the key's tuple could carry a tunnel.
func (c *EncapCounter) carrier(k *steer.FlowKey) bool {
	if k.Fragment {
		return false
	}
	switch k.Proto {
	case protoIPIP, protoIPv6, protoGRE:
		return true
	case protoUDP:
		return slices.Contains(c.ports, k.DstPort)
	}
	return false
}

// Counts returns the tally's counts.
func (t *EncapTally) Counts() *EncapCounts { return &t.counts }

// encapStack is the kinds of a frame's encapsulations, outermost first: its
// outer VLAN tags, then its shims and tunnels (steer.FlowKey.Encaps).
type encapStack [steer.MaxVLANDepth + steer.MaxEncaps]steer.EncapKind

// String joins the kinds with "+", such as "vlan+vxlan+vlan".
func (s encapStack) String() string {
	var names []string
	for _, k := range s {
		if k == steer.EncapNone {
			break
		}
		names = append(names, k.String())
	}
	return strings.Join(names, "+")
}

// count is frames and their bytes on the wire.
type count struct{ frames, bytes uint64 }

func (c *count) add(length int) {
	c.frames++
	c.bytes += uint64(length)
}

// EncapCounts are frames counted by encapsulation: one worker's, or the
// sum of several (Merge).
type EncapCounts struct {
	tunnels      steer.TunnelMode
	frames       uint64
	plain        count
	kinds        [256]uint64 // frames carrying each kind, by steer.EncapKind
	stacks       map[encapStack]*count
	notOpened    map[encapStack]*count // with TunnelsOuter, the tunnelled frames' stacks
	decapsulated uint64
	closed       uint64      // tunnelled frames hashed outside their tunnel
	closedKinds  [256]uint64 // those by their outermost tunnel's kind
}

// Merge adds o's counts to c's.
func (c *EncapCounts) Merge(o *EncapCounts) {
	c.tunnels = o.tunnels
	c.frames += o.frames
	c.plain.frames += o.plain.frames
	c.plain.bytes += o.plain.bytes
	for i := range c.kinds {
		c.kinds[i] += o.kinds[i]
		c.closedKinds[i] += o.closedKinds[i]
	}
	for s, n := range o.stacks {
		m := c.stack(&c.stacks, s)
		m.frames += n.frames
		m.bytes += n.bytes
	}
	for s, n := range o.notOpened {
		m := c.stack(&c.notOpened, s)
		m.frames += n.frames
		m.bytes += n.bytes
	}
	c.decapsulated += o.decapsulated
	c.closed += o.closed
}

// stack returns the count of stack s in the map *m, both made on first
// use.
func (c *EncapCounts) stack(m *map[encapStack]*count, s encapStack) *count {
	if *m == nil {
		*m = make(map[encapStack]*count)
	}
	n := (*m)[s]
	if n == nil {
		n = new(count)
		(*m)[s] = n
	}
	return n
}

// knownKinds are the encapsulation kinds package steer names, in its order.
func knownKinds() []steer.EncapKind {
	var ks []steer.EncapKind
	for k := steer.EncapKind(1); k != 0 && k.String() != "unknown"; k++ {
		ks = append(ks, k)
	}
	return ks
}

// stackRow is one line of the encapsulation table.
type stackRow struct {
	name      string
	notOpened bool // tunnelled, hashed by the outer header (TunnelsOuter)
	count
}

// rows returns the stacks, the most frequent first, "plain" among them.
func (c *EncapCounts) rows() []stackRow {
	var rows []stackRow
	if c.plain.frames > 0 {
		rows = append(rows, stackRow{"plain", false, c.plain})
	}
	for s, n := range c.stacks {
		rows = append(rows, stackRow{s.String(), false, *n})
	}
	for s, n := range c.notOpened {
		rows = append(rows, stackRow{s.String(), true, *n})
	}
	slices.SortFunc(rows, func(a, b stackRow) int {
		return cmp.Or(cmp.Compare(b.frames, a.frames), strings.Compare(a.name, b.name))
	})
	return rows
}

// Hint returns the one line a run with TunnelsOuter prints when it saw
// tunnelled frames it hashed by their outer headers, and "" otherwise: how
// many, their tunnels, and the flag that would spread them.
func (c *EncapCounts) Hint() string {
	if c.tunnels != steer.TunnelsOuter || c.closed == 0 {
		return ""
	}
	var kinds []string
	for _, k := range knownKinds() {
		if n := c.closedKinds[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	return fmt.Sprintf("%d of %d frames (%.1f%%) are tunnelled (%s) and were hashed by their outer headers: -tunnels inner would spread them by their inner flows",
		c.closed, c.frames, pct(c.closed, c.frames), strings.Join(kinds, ", "))
}

// WriteText writes the "Frames handled, by encapsulation" table: one row per stack
// of encapsulations (outermost first; "plain" for none; with
// TunnelsOuter, a tunnelled frame's stack marked "(not opened)": its
// tunnels were not opened, and it was hashed by its outer header),
// then how many frames were hashed inside a tunnel, or the Hint line.
func (c *EncapCounts) WriteText(out io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nFrames handled, by encapsulation (outermost first; -tunnels %s):\n", c.tunnels)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  encapsulation\tframes\tbytes\tshare\n")
	for _, r := range c.rows() {
		name := r.name
		if r.notOpened {
			name += " (not opened)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.1f%%\n", name, r.frames, r.bytes, pct(r.frames, c.frames))
	}
	tw.Flush()
	if c.tunnels == steer.TunnelsInner {
		fmt.Fprintf(&b, "  %d frames hashed by a flow inside a tunnel\n", c.decapsulated)
	}
	if h := c.Hint(); h != "" {
		fmt.Fprintf(&b, "Hint: %s.\n", h)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// Report returns the counts as the JSON report has them.
func (c *EncapCounts) Report() Encapsulations {
	e := newEncapsulations()
	e.Plain = c.plain.frames
	e.Decapsulated = c.decapsulated
	e.NotDecapsulated = c.closed
	for _, k := range knownKinds() {
		e.Kinds[k] = c.kinds[k]
		if k.Tunnel() {
			e.NotDecapsulatedKinds[k] = c.closedKinds[k]
		}
	}
	for _, r := range c.rows() {
		e.Stacks[r.name] = r.frames
	}
	return e
}

// newEncapsulations returns the report's encapsulations with every kind
// at zero.
func newEncapsulations() Encapsulations {
	e := Encapsulations{Kinds: map[steer.EncapKind]uint64{}, Stacks: map[string]uint64{},
		NotDecapsulatedKinds: map[steer.EncapKind]uint64{}}
	for _, k := range knownKinds() {
		e.Kinds[k] = 0
		if k.Tunnel() {
			e.NotDecapsulatedKinds[k] = 0
		}
	}
	return e
}

func pct(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
