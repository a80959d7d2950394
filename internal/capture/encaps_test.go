package capture

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

var testFlow = synth.Flow{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.6"), SrcPort: 40000, DstPort: 80}

// countCases classifies one frame of every encapsulation as hc says and
// counts them, in two tallies merged, as two workers would.
func countCases(t *testing.T, hc steer.HashConfig) *EncapCounts {
	t.Helper()
	cls, err := steer.NewClassifier(hc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewEncapCounter(hc)
	if err != nil {
		t.Fatal(err)
	}
	tallies := []*EncapTally{c.NewTally(), c.NewTally()}
	for i, tc := range synth.Cases {
		frame := tc.Build(testFlow)
		var cl steer.Classification
		cls.Classify(frame, &cl)
		tallies[i%2].Add(frame, &cl.Key, len(frame))
	}
	var sum EncapCounts
	for _, tl := range tallies {
		sum.Merge(tl.Counts())
	}
	return &sum
}

// TestEncapCountsInner: with tunnels opened, each frame is counted under
// its whole stack and once under each kind, the decapsulated ones apart,
// and there is no hint.
func TestEncapCountsInner(t *testing.T) {
	ports := []uint16{4789, 8472}
	n := countCases(t, steer.HashConfig{Tunnels: steer.TunnelsInner, VXLANPorts: ports})
	r := n.Report()
	wantStacks := map[string]uint64{}
	wantKinds := map[steer.EncapKind]uint64{}
	var tunnels uint64
	for _, tc := range synth.Cases {
		stack, kinds := innerStack(t, tc)
		for _, k := range kinds {
			wantKinds[k]++
		}
		wantStacks[stack]++
		if tc.Tunnel {
			tunnels++
		}
	}
	if len(r.Stacks) != len(wantStacks) {
		t.Errorf("stacks %v, want %v", r.Stacks, wantStacks)
	}
	for s, w := range wantStacks {
		if r.Stacks[s] != w {
			t.Errorf("stack %s: %d frames, want %d", s, r.Stacks[s], w)
		}
	}
	for k, got := range r.Kinds {
		if got != wantKinds[k] {
			t.Errorf("kind %s: %d frames, want %d", k, got, wantKinds[k])
		}
	}
	if r.Plain != wantStacks["plain"] || r.Decapsulated != tunnels || r.NotDecapsulated != 0 || n.Hint() != "" {
		t.Errorf("plain %d, decapsulated %d, not %d, hint %q; want %d, %d, 0, none", r.Plain, r.Decapsulated, r.NotDecapsulated, n.Hint(), wantStacks["plain"], tunnels)
	}
	var b strings.Builder
	if err := n.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Frames handled, by encapsulation (outermost first; -tunnels inner):", "vlan+vxlan", "gre+ipip",
		"mpls+pw+vlan", "frames hashed by a flow inside a tunnel"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "Hint") {
		t.Errorf("a hint with tunnels opened:\n%s", b.String())
	}
}

// innerStack returns a case's stack of kinds as tunnels inner walks them
// ("plain" for none), and its kinds, each once.
func innerStack(t *testing.T, tc synth.Case) (string, []steer.EncapKind) {
	t.Helper()
	var names []string
	var kinds []steer.EncapKind
	for _, e := range strings.Split(tc.Inner, "+") {
		name, _, _ := strings.Cut(e, ":")
		if name == "" {
			continue
		}
		names = append(names, name)
		var k steer.EncapKind
		if err := k.UnmarshalText([]byte(name)); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	if len(names) == 0 {
		return "plain", nil
	}
	return strings.Join(names, "+"), kinds
}

// TestEncapCountsOuterStacks: with tunnels closed a tunnelled frame is
// never counted as plain: its stack is the one tunnels inner walks, and
// the table marks it as not opened.
func TestEncapCountsOuterStacks(t *testing.T) {
	n := countCases(t, steer.HashConfig{VXLANPorts: []uint16{4789, 8472}})
	r := n.Report()
	want := map[string]uint64{}
	tunnelled := map[string]bool{}
	for _, tc := range synth.Cases {
		stack, kinds := innerStack(t, tc)
		want[stack]++
		tunnelled[stack] = slices.ContainsFunc(kinds, steer.EncapKind.Tunnel)
	}
	if !maps.Equal(r.Stacks, want) || r.Plain != want["plain"] {
		t.Errorf("stacks %v, plain %d; want %v", r.Stacks, r.Plain, want)
	}
	var b strings.Builder
	if err := n.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || want[f[0]] == 0 {
			continue
		}
		rows++
		if marked := strings.Contains(line, " (not opened) "); marked != tunnelled[f[0]] {
			t.Errorf("row %q: marked not opened %v, want %v", line, marked, tunnelled[f[0]])
		}
	}
	if rows != len(want) {
		t.Errorf("%d rows, want %d:\n%s", rows, len(want), b.String())
	}
}

// TestEncapCountsOuter: with tunnels closed, the frames carrying a flow in
// a tunnel are counted by their outermost tunnel, and the hint says how
// many and which flag spreads them, in one line.
func TestEncapCountsOuter(t *testing.T) {
	n := countCases(t, steer.HashConfig{VXLANPorts: []uint16{4789, 8472}})
	r := n.Report()
	want := map[steer.EncapKind]uint64{}
	var tunnels uint64
	for _, tc := range synth.Cases {
		if !tc.Tunnel {
			continue
		}
		tunnels++
		for _, e := range strings.Split(tc.Inner, "+") {
			name, _, _ := strings.Cut(e, ":")
			var k steer.EncapKind
			if err := k.UnmarshalText([]byte(name)); err != nil {
				t.Fatal(err)
			}
			if k.Tunnel() {
				want[k]++
				break
			}
		}
	}
	if r.NotDecapsulated != tunnels || r.Decapsulated != 0 {
		t.Errorf("not decapsulated %d, decapsulated %d; want %d, 0", r.NotDecapsulated, r.Decapsulated, tunnels)
	}
	for k, got := range r.NotDecapsulatedKinds {
		if got != want[k] || !k.Tunnel() {
			t.Errorf("not decapsulated %s: %d, want %d", k, got, want[k])
		}
	}
	if r.Kinds[steer.EncapVXLAN] != 0 || r.Kinds[steer.EncapMPLS] == 0 {
		t.Errorf("kinds %v: tunnels are not walked, MPLS is", r.Kinds)
	}
	var b strings.Builder
	if err := n.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	var hints []string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "Hint: ") {
			hints = append(hints, line)
		}
	}
	var kinds []string
	for _, k := range knownKinds() {
		if want[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, want[k]))
		}
	}
	prefix := fmt.Sprintf("Hint: %d of %d frames (%.1f%%) are tunnelled (%s) and were hashed by their outer headers",
		tunnels, len(synth.Cases), 100*float64(tunnels)/float64(len(synth.Cases)), strings.Join(kinds, ", "))
	if len(hints) != 1 || !strings.Contains(hints[0], "-tunnels inner") || !strings.HasPrefix(hints[0], prefix) {
		t.Errorf("hint lines %q\n%s", hints, b.String())
	}
}

// TestEncapCountsOuterPorts: the check for tunnels left closed takes the
// VXLAN ports the run hashes with: a port not among them is no tunnel.
func TestEncapCountsOuterPorts(t *testing.T) {
	r := countCases(t, steer.HashConfig{}).Report()
	if r.NotDecapsulatedKinds[steer.EncapVXLAN] != 3 { // the case on port 8472 is not counted
		t.Errorf("VXLAN on the default port only: %d frames, want 3", r.NotDecapsulatedKinds[steer.EncapVXLAN])
	}
}
