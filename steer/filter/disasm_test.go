package filter

import (
	"math/rand"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/bpf"

	"github.com/rpsgo/rps/internal/netns"
)

// TestDisassembleMatchesTcpdump: for hundreds of expressions, tcpdump's
// program (-dd) disassembled by Program.Disassemble is exactly what
// `tcpdump -d` prints; live programs too (tcpdump -i lo: ancillary loads,
// jumps), when tcpdump can open lo.
func TestDisassembleMatchesTcpdump(t *testing.T) {
	requireTcpdump(t)
	g := &exprGen{r: rand.New(rand.NewSource(4))}
	exprs := append([]string{}, handExprs...)
	for i := 0; i < 150; i++ {
		exprs = append(exprs, g.expr(i%4))
	}
	live := true
	if _, err := Compile(Options{Interface: "lo", Compiler: CompilerTcpdump}, "vlan"); err != nil {
		live = false
		t.Logf("no live programs: %v", err)
	}
	checked := 0
	for _, e := range uniq(exprs) {
		forms := [][]string{{"-y", "EN10MB"}}
		if live && strings.Contains(e, "vlan") {
			forms = append(forms, []string{"-i", "lo", "-p"})
		}
		for _, args := range forms {
			raw, msg, err := runTcpdump("tcpdump", 10*time.Second, e, args...)
			if err != nil || msg != "" {
				continue
			}
			p, err := New(raw, e)
			if err != nil {
				t.Fatalf("%q: %v", e, err)
			}
			out, err := exec.Command("tcpdump", append(args, "-d", "--", e)...).Output()
			if err != nil {
				t.Fatalf("%q: tcpdump -d: %v", e, err)
			}
			if got := p.Disassemble(); got != string(out) {
				t.Errorf("%q %v:\n%s\ntcpdump -d:\n%s", e, args, got, out)
			}
			checked++
		}
	}
	t.Logf("%d programs checked (live ones: %v)", checked, live)
	if checked < 150 {
		t.Errorf("only %d programs checked", checked)
	}
	if live {
		return
	}
	netns.SkipOrFatal(t, "tcpdump cannot open lo: live programs not checked")
}

// TestDisassembleInstructions: the instructions tcpdump rarely or never
// prints, formatted as libpcap's bpf_image formats them.
func TestDisassembleInstructions(t *testing.T) {
	for _, tc := range []struct {
		ins  bpf.RawInstruction
		want string
	}{
		{bpf.RawInstruction{Op: 0x06, K: 0xffffffff}, "ret      #-1"},
		{bpf.RawInstruction{Op: 0x16}, "ret      "},
		{bpf.RawInstruction{Op: 0x0e}, "unimp    0xe"},
		{bpf.RawInstruction{Op: 0x20, K: 0xfffff000 + 44}, "ld       [vlan_tci]"},
		{bpf.RawInstruction{Op: 0x30, K: 0xfffff000 + 48}, "ldb      [vlanp]"},
		{bpf.RawInstruction{Op: 0x28, K: 0xfffff000 + 4}, "ldh      [type]"},
		{bpf.RawInstruction{Op: 0x20, K: 0xfffff000 + 2}, "ld       [-4094]"},
		{bpf.RawInstruction{Op: 0x80}, "ld       #pktlen"},
		{bpf.RawInstruction{Op: 0x48, K: 14}, "ldh      [x + 14]"},
		{bpf.RawInstruction{Op: 0x00, K: 255}, "ld       #0xff"},
		{bpf.RawInstruction{Op: 0x01, K: 4}, "ldx      #0x4"},
		{bpf.RawInstruction{Op: 0xb1, K: 14}, "ldxb     4*([14]&0xf)"},
		{bpf.RawInstruction{Op: 0x60, K: 3}, "ld       M[3]"},
		{bpf.RawInstruction{Op: 0x61, K: 3}, "ldx      M[3]"},
		{bpf.RawInstruction{Op: 0x02, K: 1}, "st       M[1]"},
		{bpf.RawInstruction{Op: 0x03, K: 1}, "stx      M[1]"},
		{bpf.RawInstruction{Op: 0x05, K: 3}, "ja       9"},
		{bpf.RawInstruction{Op: 0x15, Jt: 0, Jf: 2, K: 0x800}, "jeq      #0x800           jt 6\tjf 8"},
		{bpf.RawInstruction{Op: 0x1d, Jt: 1, Jf: 0}, "jeq      x                jt 7\tjf 6"},
		{bpf.RawInstruction{Op: 0x25, K: 5}, "jgt      #0x5             jt 6\tjf 6"},
		{bpf.RawInstruction{Op: 0x3d}, "jge      x                jt 6\tjf 6"},
		{bpf.RawInstruction{Op: 0x45, K: 0x1fff}, "jset     #0x1fff          jt 6\tjf 6"},
		{bpf.RawInstruction{Op: 0x55, K: 1}, "unimp    0x55             jt 6\tjf 6"},
		{bpf.RawInstruction{Op: 0x04, K: 0xfffffffc}, "add      #-4"},
		{bpf.RawInstruction{Op: 0x0c}, "add      x"},
		{bpf.RawInstruction{Op: 0x14, K: 2}, "sub      #2"},
		{bpf.RawInstruction{Op: 0x24, K: 2}, "mul      #2"},
		{bpf.RawInstruction{Op: 0x34, K: 2}, "div      #2"},
		{bpf.RawInstruction{Op: 0x94, K: 2}, "mod      #2"},
		{bpf.RawInstruction{Op: 0x44, K: 16}, "or       #0x10"},
		{bpf.RawInstruction{Op: 0x54, K: 16}, "and      #0x10"},
		{bpf.RawInstruction{Op: 0xa4, K: 16}, "xor      #0x10"},
		{bpf.RawInstruction{Op: 0x64, K: 2}, "lsh      #2"},
		{bpf.RawInstruction{Op: 0x7c}, "rsh      x"},
		{bpf.RawInstruction{Op: 0x84}, "neg      "},
		{bpf.RawInstruction{Op: 0x8c}, "unimp    0x8c"},
		{bpf.RawInstruction{Op: 0x07}, "tax      "},
		{bpf.RawInstruction{Op: 0x87}, "txa      "},
		{bpf.RawInstruction{Op: 0x08}, "unimp    0x8"},
	} {
		if got := image(tc.ins, 5)[6:]; got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.ins, got, tc.want)
		}
	}
}
