package bpfc

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
)

// accepts reports whether prog is the one that accepts every frame, and
// rejects whether compiling expr said it rejects every one.
func acceptsAll(t *testing.T, expr string) bool {
	t.Helper()
	prog, err := Compile(expr, Options{})
	if err != nil {
		if strings.Contains(err.Error(), "rejects all packets") {
			return false
		}
		t.Fatalf("%q: %v", expr, err)
	}
	return len(prog) == 1 && prog[0].K == defaultSnaplen
}

// TestArithmetic: constant arithmetic folds to libpcap's values, with
// its grammar's precedence (% and ^ have none: they take everything to
// their right).
func TestArithmetic(t *testing.T) {
	for expr, want := range map[string]uint32{
		"2 + 3 * 4":       14,
		"10 - 2 - 3":      5,
		"100 / 10 / 5":    2,
		"1 << 2 + 1":      8,
		"6 & 3 | 8":       10,
		"1 | 2 & 3":       3,
		"1 % 5 + 2":       1,
		"2 * 3 % 4":       6,
		"7 ^ 2 | 1":       4,
		"2 | 7 ^ 1":       6,
		"-2 + 5":          3,
		"-2 % 5":          0xfffffffe,
		"- - 3":           3,
		"0x10 + 010":      24,
		"1 << 31 << 1":    0,
		"(1 + 2) * 3":     9,
		"tcpflags + 1":    14,
		"icmp-echo":       8,
		"tcp-syn|tcp-ack": 0x12,
	} {
		if !acceptsAll(t, fmt.Sprintf("%s = %d", expr, want)) {
			t.Errorf("%s is not %d", expr, want)
		}
		if acceptsAll(t, fmt.Sprintf("%s = %d", expr, want+1)) {
			t.Errorf("%s is %d", expr, want+1)
		}
	}
}

// TestInheritance: an address or number after and/or takes the
// qualifiers of the primitive before it.
func TestInheritance(t *testing.T) {
	for short, long := range map[string]string{
		"host 10.0.0.1 or 10.0.0.2":                     "host 10.0.0.1 or host 10.0.0.2",
		"tcp port 80 or 443":                            "tcp port 80 or tcp port 443",
		"src host 10.0.0.1 and not 10.0.0.2":            "src host 10.0.0.1 and not src host 10.0.0.2",
		"host (10.0.0.1 or 10.0.0.2)":                   "host 10.0.0.1 or host 10.0.0.2",
		"ether src 02:00:00:00:00:01 or 0200.0000.0002": "ether src 02:00:00:00:00:01 or ether src 02:00:00:00:00:02",
		"udp port 53 and (tcp) or 123":                  "udp port 53 and tcp or udp port 123",
		"net 10 or 192.168":                             "net 10.0.0.0/8 or net 192.168.0.0/16",
	} {
		a, err := Compile(short, Options{})
		if err != nil {
			t.Fatalf("%q: %v", short, err)
		}
		b, err := Compile(long, Options{})
		if err != nil {
			t.Fatalf("%q: %v", long, err)
		}
		if !slices.Equal(a, b) {
			t.Errorf("%q compiles otherwise than %q", short, long)
		}
	}
	for _, expr := range []string{"tcp and 10.0.0.1", "(host 10.0.0.1) or 10.0.0.2", "vlan 100 or 200"} {
		if _, err := Compile(expr, Options{}); err == nil || !strings.Contains(err.Error(), "syntax error") {
			t.Errorf("%q: %v, want a syntax error", expr, err)
		}
	}
}

// TestLex: the scanner's longest match, the earlier rule first.
func TestLex(t *testing.T) {
	for in, want := range map[string][]tokKind{
		"host 10.0.0.1":                {tHOST, tHID},
		"10.1":                         {tHID},
		"1.2.3.4.5":                    {tID},
		"fe80::1":                      {tHID6},
		"::ffff:10.0.0.1":              {tHID6},
		"1:2:3:4:5:6":                  {tEID},
		"0011.2233.4455":               {tEID},
		"001122334455":                 {tEID},
		"12345":                        {tNUM},
		"0x1f":                         {tNUM},
		"tcpx":                         {tID},
		"tcp-syn":                      {tNUM},
		"icmp6-echoreply":              {tNUM},
		"\\tcp":                        {tID},
		"8000-8080":                    {tID},
		"a&&b||!c":                     {tID, tAnd, tID, tOr, tNot, tID},
		"ip[0]>=1<=2!=3==4":            {tIP, tLBrack, tNUM, tRBrack, tGEQ, tNUM, tLEQ, tNUM, tNEQ, tNUM, tEQ, tNUM},
		"len<<2>>1":                    {tLEN, tLSH, tNUM, tRSH, tNUM},
		"$1f":                          {tAID},
		"es-is and is-is":              {tESIS, tAnd, tISIS},
		"ether host ab:cd:ef:01:02:03": {tLINK, tHOST, tEID},
	} {
		toks, err := lex(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		var got []tokKind
		for _, tok := range toks[:len(toks)-1] {
			got = append(got, tok.kind)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
	for _, in := range []string{"1:2:", "0x100000000", "08", "fe80::1::2", "host @"} {
		if _, err := Compile(in, Options{}); err == nil {
			t.Errorf("%q compiles", in)
		}
	}
}

// TestUnsupported: a construct left to libpcap is an error wrapping
// ErrUnsupported that names it; an expression libpcap rejects is an
// *Error.
func TestUnsupported(t *testing.T) {
	for expr, name := range map[string]string{
		"host example.com":     "example.com",
		"ip protochain 6":      "protochain",
		"gateway router":       "gateway",
		"ip broadcast":         "ip broadcast",
		"byte 3 & 4":           "byte &",
		"pppoes 1":             "pppoes",
		"geneve":               "geneve",
		"inbound":              "inbound",
		"ether host router":    "Ethernet host name",
		"net loopback":         "network name",
		"decnet host 1.2":      "decnet",
		"wlan type mgt":        "802.11",
		"$1f":                  "ARCnet",
		"tcp and (ifindex 1)":  "ifindex",
		"llc":                  "llc",
		"vlan and src addr1 1": "addr1",
	} {
		_, err := Compile(expr, Options{})
		var perr *Error
		if !errors.Is(err, ErrUnsupported) || errors.As(err, &perr) || !strings.Contains(err.Error(), name) {
			t.Errorf("%q: %v; want ErrUnsupported naming %q", expr, err, name)
		}
	}
	for _, expr := range []string{"tcp port", "port 65536", "vlan 4096", "mpls 0x100000", "ip6 host 1.2.3.4",
		"ip host ::1", "net 10.0.0.1/8", "tcp[0:3] = 1", "tcp[0] / 0 = 1", "tcp[0] % 0 = 1", "tcp[0] << 32 = 1",
		"tcp[0] / (1 - 1) = 1", "mpls and vlan", "mpls and arp", "tcp proto 6", "src proto 6", "ether host 10.0.0.1",
		"port 1.2.3.4", "host 10.0.0.1 mask 255.0.0.0", "ip proto \\nosuchproto", "tcp and udp", "radio[0] = 1"} {
		_, err := Compile(expr, Options{})
		var perr *Error
		if !errors.As(err, &perr) {
			t.Errorf("%q: %v; want an *Error", expr, err)
		}
	}
}

// TestLongJumps: a program longer than an 8-bit branch offset reaches
// branches past 255 instructions through jumps (or returns) placed
// after them, and every branch stays inside the program.
func TestLongJumps(t *testing.T) {
	var parts []string
	for i := 0; i < 150; i++ {
		parts = append(parts, fmt.Sprintf("(tcp port %d and host 10.0.%d.%d)", 1000+i, i/200, i%200))
	}
	expr := strings.Join(parts, " or ")
	prog, err := Compile(expr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) < 300 {
		t.Fatalf("%d instructions: not long enough to test", len(prog))
	}
	if err := checkProgram(prog); err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(mustDisassemble(t, prog))
	if err != nil {
		t.Fatal(err)
	}
	// A frame for the last alternative, TCP from 10.0.0.149 to port 1149.
	frame := make([]byte, 54)
	frame[12], frame[13] = 0x08, 0x00
	frame[14] = 0x45
	frame[23] = 6
	copy(frame[26:], []byte{10, 0, 0, 149})
	frame[36], frame[37] = 1149>>8, 1149&0xff
	if n, err := vm.Run(frame); err != nil || n == 0 {
		t.Errorf("the frame for the last alternative: %d, %v", n, err)
	}
	frame[37]++
	if n, err := vm.Run(frame); err != nil || n != 0 {
		t.Errorf("another port: %d, %v", n, err)
	}
}

func mustDisassemble(t *testing.T, prog []bpf.RawInstruction) []bpf.Instruction {
	t.Helper()
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatal("the program has instructions x/net/bpf does not know")
	}
	return insns
}

// checkProgram checks what the kernel checks of a program's structure,
// and that it reads no register before setting it.
func checkProgram(prog []bpf.RawInstruction) error {
	n := len(prog)
	if n == 0 || n > MaxInstructions {
		return fmt.Errorf("%d instructions", n)
	}
	if prog[n-1].Op&7 != clsRET {
		return fmt.Errorf("the last instruction is not a return")
	}
	for i, ins := range prog {
		if ins.Op&7 != clsJMP {
			continue
		}
		left := uint64(n - i - 1)
		if ins.Op == clsJMP|jmpJA {
			if uint64(ins.K) >= left {
				return fmt.Errorf("instruction %d jumps past the end", i)
			}
		} else if uint64(ins.Jt) >= left || uint64(ins.Jf) >= left {
			return fmt.Errorf("instruction %d branches past the end", i)
		}
	}
	return nil
}

// TestLive: the live program tests the tag's metadata for the first vlan
// only, and cannot run in user space; an expression without vlan is the
// same in both forms.
func TestLive(t *testing.T) {
	file, err := Compile("tcp port 80", Options{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := Compile("tcp port 80", Options{Live: true})
	if err != nil || !slices.Equal(file, live) {
		t.Errorf("tcp port 80 live: %v, %v", live, err)
	}
	live, err = Compile("vlan 100 and vlan 200 and ip", Options{Live: true})
	if err != nil {
		t.Fatal(err)
	}
	present, tag := 0, 0
	for _, ins := range live {
		switch {
		case ins.Op&7 == clsLD && ins.Op&0xe0 == modeABS && ins.K == offsetVLANTagPresent:
			present++
		case ins.Op&7 == clsLD && ins.Op&0xe0 == modeABS && ins.K == offsetVLANTag:
			tag++
		}
	}
	if present == 0 || tag == 0 {
		t.Errorf("the live program reads no tag metadata:\n%v", live)
	}
	if _, ok := bpf.Disassemble(live); ok {
		if _, err := bpf.NewVM(mustDisassemble(t, live)); err == nil {
			t.Error("x/net/bpf's machine takes the live program")
		}
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{"tcp port 80", "host 10.0.0.1 or 10.0.0.2", "vlan 100 and ip", "mpls and ip6",
		"tcp[tcpflags] & (tcp-syn|tcp-ack) != 0", "ip[6:2] & 0x1fff = 0", "not (udp or icmp)", "ether host 1:2:3:4:5:6",
		"net 10.0.0.0 mask 255.0.0.0", "portrange 1-1024", "ip6 net fd00::/8", "1 % 2 ^ 3 = -len", "((("} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, expr string, live bool) {
		prog, err := Compile(expr, Options{Live: live})
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("%q: an error that is neither *Error nor ErrUnsupported: %v", expr, err)
			}
			return
		}
		if err := checkProgram(prog); err != nil {
			t.Fatalf("%q: %v\n%v", expr, err, prog)
		}
	})
}

// TestLoadsKept: a test whose branches meet only once the second phase
// has folded what follows (1 + 1 = 2 is arithmetic, known only then)
// still loads its operand, even one compared with a constant in A, as
// libpcap's program does, so a frame too short for the load is rejected.
func TestLoadsKept(t *testing.T) {
	prog, err := Compile("ip and (1 < ip[19] or 1 + 1 = 2)", Options{})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(mustDisassemble(t, prog))
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 34)
	frame[12] = 0x08
	if n, _ := vm.Run(frame); n == 0 {
		t.Errorf("an IPv4 frame is rejected:\n%v", prog)
	}
	if n, _ := vm.Run(frame[:33]); n != 0 {
		t.Errorf("a frame without ip[19] is accepted:\n%v", prog)
	}
}
