package filter

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/rpsgo/rps/internal/netns"
)

// requireTcpdump skips a test without tcpdump, or fails it when
// STEER_REQUIRE_PRIV=1 or CI=true (CI installs tcpdump).
func requireTcpdump(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tcpdump"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs tcpdump (CI=true requires it): %v", err)
		}
		netns.SkipOrFatal(t, "needs tcpdump: "+err.Error())
	}
}

// TestTestdataPrograms runs each program of testdata/tcpdump.txt over the
// corpus: it must accept exactly the frames its expression's predicate
// says (libpcap's semantics, written out in corpus_test.go).
func TestTestdataPrograms(t *testing.T) {
	exprs, progs := testdata(t)
	if len(exprs) < 15 {
		t.Fatalf("testdata has %d expressions", len(exprs))
	}
	frames := corpus()
	for _, e := range exprs {
		if predicates[e] == nil {
			t.Errorf("%q: no predicate", e)
			continue
		}
		p, err := Parse(progs[e])
		if err != nil {
			t.Errorf("%q: %v", e, err)
			continue
		}
		checkAgainstPredicate(t, e, p, frames)
	}
}

func checkAgainstPredicate(t *testing.T, expr string, p *Program, frames []*pkt) {
	t.Helper()
	accepted, bad := 0, 0
	for _, f := range frames {
		keep, ok := p.Match(f.data)
		if ok != want(expr, f) {
			if bad++; bad <= 3 {
				t.Errorf("%q: frame % x: accepted %v, want %v", expr, f.data, ok, !ok)
			}
		}
		if ok {
			accepted++
			if keep != len(f.data) {
				t.Errorf("%q: keeps %d of %d bytes", expr, keep, len(f.data))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%q: %d of %d frames misjudged", expr, bad, len(frames))
	}
	if accepted == 0 || accepted == len(frames) {
		t.Errorf("%q accepts %d of %d frames: the corpus does not tell it apart", expr, accepted, len(frames))
	}
}

// TestTestdataIsTcpdumps compiles each expression with the installed
// tcpdump and checks that its program judges the corpus as the recorded
// one does (another libpcap may emit other, equivalent code).
func TestTestdataIsTcpdumps(t *testing.T) {
	requireTcpdump(t)
	exprs, progs := testdata(t)
	frames := corpus()
	for _, e := range exprs {
		got, err := Compile(Options{Compiler: CompilerTcpdump}, e)
		if err != nil {
			t.Errorf("%q: %v", e, err)
			continue
		}
		if got.String() != e {
			t.Errorf("String() = %q, want %q", got, e)
		}
		rec, err := Parse(progs[e])
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got.Instructions(), rec.Instructions()) {
			continue
		}
		t.Logf("%q: the installed tcpdump emits other code than the recorded one", e)
		checkAgainstPredicate(t, e, got, frames)
	}
}

// TestBuiltinTestdata: the built-in compiler's program for each
// expression of testdata/tcpdump.txt accepts exactly the frames its
// predicate says, without tcpdump.
func TestBuiltinTestdata(t *testing.T) {
	exprs, _ := testdata(t)
	frames := corpus()
	for _, e := range exprs {
		p, err := Compile(Options{Compiler: CompilerBuiltin}, e)
		if err != nil {
			t.Errorf("%q: %v", e, err)
			continue
		}
		checkAgainstPredicate(t, e, p, frames)
	}
}

// TestCompileArgs: arguments given as tcpdump takes them are one
// expression.
func TestCompileArgs(t *testing.T) {
	a, err := Compile(Options{}, "tcp", "port", "80")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compile(Options{}, "  tcp port 80 ")
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != "tcp port 80" || !slices.Equal(a.Instructions(), b.Instructions()) {
		t.Errorf("%q and %q compile differently", a, b)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []Compiler{CompilerBuiltin, CompilerTcpdump} {
		if c == CompilerTcpdump {
			requireTcpdump(t)
		}
		for expr, msg := range map[string]string{
			"tcp port":            "syntax error",
			"port 99999":          "65535",
			"vlan 5000":           "4095",
			"tcp and udp":         "rejects all packets",
			"net 10.0.0.1/8":      "non-network bits",
			"ip6 host 10.0.0.1":   "ip6",
			"tcp[0] / 0 = 1":      "division by zero",
			"ether host 1:2:3:4:": "bogus ethernet address",
		} {
			_, err := Compile(Options{Compiler: c}, expr)
			if !errors.Is(err, ErrExpression) || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "tcpdump: ") {
				t.Errorf("%v: %q: %v; want ErrExpression with libpcap's message (%q) without tcpdump's prefix", c, expr, err, msg)
			}
		}
	}
	if _, err := Compile(Options{}, " "); !errors.Is(err, ErrExpression) {
		t.Errorf("empty: %v", err)
	}
}

// TestFallback: what the built-in compiler does not cover (a host name,
// protochain) goes to tcpdump when it is installed, and is ErrNoCompiler,
// naming the construct and saying what to give instead, when it is not or
// when the built-in compiler is asked for; a program text needs neither.
func TestFallback(t *testing.T) {
	opts := Options{Tcpdump: "rps-no-such-tcpdump"}
	if p, err := Compile(opts, "tcp", "port", "80"); err != nil || p.Len() != 20 {
		t.Errorf("without tcpdump, tcp port 80: %v, %v", p, err)
	}
	_, err := Compile(opts, "ip", "protochain", "6")
	if !errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), "protochain") || !strings.Contains(err.Error(), "tcpdump -dd ip protochain 6") {
		t.Errorf("protochain without tcpdump: %v", err)
	}
	if _, err := Compile(opts, "host", "localhost"); err == nil || !strings.Contains(err.Error(), `"localhost"`) {
		t.Errorf("a host name without tcpdump: %v", err)
	}
	_, err = Compile(Options{Compiler: CompilerTcpdump, Tcpdump: "rps-no-such-tcpdump"}, "tcp[13] & 2 != 0")
	if !errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), "tcpdump -dd 'tcp[13] & 2 != 0'") {
		t.Errorf("tcpdump asked for, not installed: the suggested command is not quoted for the shell: %v", err)
	}
	if _, err := Compile(Options{Compiler: CompilerBuiltin}, "ip protochain 6"); !errors.Is(err, ErrNoCompiler) {
		t.Errorf("protochain with the built-in compiler: %v", err)
	}
	_, progs := testdata(t)
	p, err := Compile(opts, progs["tcp port 80"])
	if err != nil || p.Len() != 20 {
		t.Fatalf("a -dd program without tcpdump: %v, %v", p, err)
	}
	// -ddd, on lines and comma separated as iptables takes it.
	ddd := "4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n"
	for _, text := range []string{ddd, strings.ReplaceAll(strings.TrimSpace(ddd), "\n", ",")} {
		p, err := Compile(opts, text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		want := []bpf.RawInstruction{{Op: 0x28, K: 12}, {Op: 0x15, Jf: 1, K: 0x800}, {Op: 6, K: 262144}, {Op: 6}}
		if !slices.Equal(p.Instructions(), want) {
			t.Errorf("%q: %v", text, p.Instructions())
		}
	}
	requireTcpdump(t)
	if p, err := Compile(Options{}, "host localhost"); err != nil || p.Len() < 10 {
		t.Errorf("a host name with tcpdump: %v, %v", p, err)
	}
}

func TestCompilerText(t *testing.T) {
	for _, c := range []Compiler{CompilerAuto, CompilerBuiltin, CompilerTcpdump} {
		b, err := c.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Compiler
		if err := got.UnmarshalText(b); err != nil || got != c {
			t.Errorf("%v: %q gives %v, %v", c, b, got, err)
		}
	}
	var c Compiler
	if err := c.UnmarshalText([]byte("libpcap")); err == nil {
		t.Error("an unknown name is taken")
	}
	if _, err := Compiler(7).MarshalText(); err == nil {
		t.Error("an unknown compiler marshals")
	}
	if _, err := Compile(Options{Compiler: 7}, "tcp"); err == nil {
		t.Error("an unknown compiler compiles")
	}
}

func TestIsProgram(t *testing.T) {
	for text, want := range map[string]bool{
		"tcp port 80":                  false,
		"10":                           false,
		"1 2 3 4 5":                    true, // one instruction announced, four numbers: -ddd
		"host 10.0.0.1":                false,
		"{ 0x6, 0, 0, 0x00040000 },":   true,
		"1\n6 0 0 262144":              true,
		"1,6 0 0 262144":               true,
		"2,6 0 0 262144":               false,
		"less 64":                      false,
		"portrange 8000-8080":          false,
		"tcp[13] & 2 != 0 and port 80": false,
	} {
		if got := IsProgram(text); got != want {
			t.Errorf("IsProgram(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	ret := "{ 0x6, 0, 0, 0x00040000 },"
	long := strings.Repeat("{ 0x28, 0, 0, 12 },\n", MaxLen) + ret
	for name, text := range map[string]string{
		"empty":            "",
		"no closing brace": "{ 0x6, 0, 0, 0x00040000",
		"three fields":     "{ 0x6, 0, 0 }",
		"op too big":       "{ 0x10000, 0, 0, 0 }",
		"jt too big":       "{ 0x15, 256, 0, 0 },\n" + ret,
		"k too big":        "{ 0x6, 0, 0, 0x100000000 }",
		"not a number":     "{ 0x6, zero, 0, 0 }",
		"garbage before":   "Warning: assuming Ethernet\n" + ret,
		"garbage after":    ret + " oops",
		"jump past end":    "{ 0x15, 1, 0, 0x800 },\n" + ret,
		"ja past end":      "{ 0x5, 0, 0, 1 },\n" + ret,
		"ja huge":          "{ 0x5, 0, 0, 0xffffffff },\n" + ret,
		"no return":        "{ 0x28, 0, 0, 12 },",
		"too long":         long,
		"ddd count":        "0",
		"ddd short":        "2\n6 0 0 0",
		"ddd count big":    "5000 " + strings.Repeat("6 0 0 0 ", 5000),
		"ddd negative":     "1\n6 0 0 -1",
	} {
		if p, err := Parse(text); !errors.Is(err, ErrProgram) {
			t.Errorf("%s: %v, %v; want ErrProgram", name, p, err)
		}
	}
}

// TestLiveProgramInUserSpace: a program with a Linux ancillary load (the
// out-of-band VLAN tag a live program reads) is a valid program for the
// kernel, but not for the user-space VM.
func TestLiveProgramInUserSpace(t *testing.T) {
	// ldb [vlanp]; jeq #1 jt 0 jf 1; ret #262144; ret #0
	p, err := Parse("{ 0x30, 0, 0, 0xfffff030 },\n{ 0x15, 0, 1, 0x00000001 },\n{ 0x6, 0, 0, 0x00040000 },\n{ 0x6, 0, 0, 0x00000000 },")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.UserSpace(); !errors.Is(err, ErrUserSpace) {
		t.Errorf("UserSpace: %v", err)
	}
	if _, ok := p.Match(make([]byte, 64)); ok {
		t.Error("a program the VM cannot run accepted a frame")
	}
	if _, err := NewSource(nil, p); !errors.Is(err, ErrUserSpace) {
		t.Errorf("NewSource: %v", err)
	}
}

func TestDisassemble(t *testing.T) {
	_, progs := testdata(t)
	p, err := Parse(progs["ip6"])
	if err != nil {
		t.Fatal(err)
	}
	want := "(000) ldh      [12]\n(001) jeq      #0x86dd          jt 2\tjf 3\n(002) ret      #262144\n(003) ret      #0\n"
	if got := p.Disassemble(); got != want {
		t.Errorf("Disassemble:\n%s\nwant:\n%s", got, want)
	}
}

// TestMatchNegate: a program with neg (libpcap's unary minus) runs in
// user space; x/net/bpf's machine fails on neg, which rejected every
// frame.
func TestMatchNegate(t *testing.T) {
	// ld len; neg; jeq #-60; ret #262144; ret #0
	p, err := Parse("{ 0x80, 0, 0, 0 }, { 0x84, 0, 0, 0 }, { 0x15, 0, 1, 0xffffffc4 }, { 0x6, 0, 0, 0x40000 }, { 0x6, 0, 0, 0 },")
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]bool{60: true, 61: false, 0: false} {
		if _, ok := p.Match(make([]byte, n)); ok != want {
			t.Errorf("%d bytes: accepted %v, want %v", n, ok, want)
		}
	}
	c, err := Compile(Options{Compiler: CompilerBuiltin}, "-len = -60")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Match(make([]byte, 60)); !ok {
		t.Errorf("-len = -60 rejects a 60-byte frame:\n%s", c.Disassemble())
	}
}

func TestMatchSnapLen(t *testing.T) {
	// ret #64: accept every frame, keep 64 bytes.
	p, err := Parse("{ 0x6, 0, 0, 64 }")
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]int{0: 0, 10: 10, 64: 64, 1500: 64} {
		keep, ok := p.Match(make([]byte, n))
		if !ok || keep != want {
			t.Errorf("%d bytes: keep %d, %v; want %d", n, keep, ok, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	_, progs := testdata(f)
	for _, p := range progs {
		f.Add(p)
	}
	f.Add("4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n")
	f.Add("{ 0x5, 0, 0, 0xffffffff }, { 0x6, 0, 0, 1 }")
	frames := corpus()
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse(text)
		if err != nil {
			if !errors.Is(err, ErrProgram) {
				t.Fatalf("error %v does not wrap ErrProgram", err)
			}
			return
		}
		for _, fr := range frames[:50] {
			if keep, ok := p.Match(fr.data); ok && (keep < 0 || keep > len(fr.data)) {
				t.Fatalf("keep %d of %d bytes", keep, len(fr.data))
			}
		}
	})
}

// TestLiveInterface: a live program for an Ethernet or loopback interface
// is compiled in Go, without privileges; a missing interface is an error
// that names it.
func TestLiveInterface(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("live programs are Linux's")
	}
	p, err := Compile(Options{Interface: "lo", Compiler: CompilerBuiltin}, "vlan 100 and tcp")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.UserSpace(); !errors.Is(err, ErrUserSpace) {
		t.Errorf("the live program of vlan 100 runs in user space: %v", err)
	}
	if !strings.Contains(p.Disassemble(), "[vlanp]") {
		t.Errorf("the live program reads no tag metadata:\n%s", p.Disassemble())
	}
	file, err := Compile(Options{Compiler: CompilerBuiltin}, "vlan 100 and tcp")
	if err != nil || file.UserSpace() != nil {
		t.Fatalf("file form: %v, %v", err, file.UserSpace())
	}
	if _, err := Compile(Options{Interface: "rps-no-such-if0", Compiler: CompilerBuiltin}, "tcp"); err == nil || !strings.Contains(err.Error(), "rps-no-such-if0") {
		t.Errorf("a missing interface: %v", err)
	}
}
