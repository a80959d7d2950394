package filter

import (
	"errors"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/bpf"

	"github.com/rpsgo/rps/internal/netns"
)

// envInt returns the number in the environment variable name, or def.
// FILTER_DIFF_EXPRS (how many random expressions), FILTER_DIFF_SEED
// (their seed) and FILTER_DIFF_FRAMES (at most how many capture frames;
// 0 for all) let a search run longer by hand than the test's default.
func envInt(t *testing.T, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return n
	}
	return def
}

// diffFrames returns the frames the differential tests run programs
// over: generated ones and those of the captures.
func diffFrames(t *testing.T) [][]byte {
	return append(generatedFrames(t), captureFrames(t, envInt(t, "FILTER_DIFF_FRAMES", 1500))...)
}

// handExprs are expressions the differential tests always include: the
// documented examples and the cases where libpcap's semantics are subtle.
var handExprs = []string{
	"tcp port 80", "host 10.0.0.1 or 10.0.0.2", "host 192.0.2.10 and not 192.0.2.11", "port 80 or 443",
	"tcp port 80 and not 443", "src host 10.0.0.1 and (10.0.0.2 or 192.0.2.10)", "host (10.0.0.1 or 10.0.0.2)",
	"net 192.168.0.0/16", "net 10 or net 192.168", "net 192.168.1.0 mask 255.255.255.0", "host 10.1",
	"ip6 net fd00::/16", "ip6 host fd00::1", "host fd00::1 or fd00::2", "ether host 02:00:00:00:00:01",
	"ether src 02:00:00:00:00:01 or 02:00:00:00:00:02", "ether broadcast", "ether multicast", "ip multicast",
	"ip6 multicast", "vlan", "vlan 100", "vlan and vlan", "vlan 100 and vlan 200", "vlan or ip", "vlan 100 or vlan 200",
	"vlan and tcp port 80", "not vlan and ip", "mpls", "mpls 100", "mpls and ip", "mpls and mpls and ip6",
	"mpls and host 10.0.0.1", "mpls and tcp port 80", "ip proto 6", "ip6 proto 17", "proto 58", "ip proto \\tcp",
	"ether proto 0x88cc", "ether proto \\ip6", "ether proto 6", "ether proto 0xfe", "ether proto 100", "greater 100",
	"less 64", "len >= 60 and len <= 100", "ip[6:2] & 0x1fff = 0", "tcp[tcpflags] & (tcp-syn|tcp-ack) != 0",
	"icmp[icmptype] = icmp-echo", "icmp6[icmp6type] = icmp6-echo", "tcp[13] & 2 != 0", "tcp[0] + udp[0] = 5",
	"ip[1] & 0xffffffff = 0", "ip[1] & 0xffffffff != 0", "tcp[0] & 0 = 0", "tcp[100] = 1 or ip[0] & 0 = 0",
	"5 = 5 or tcp[100] = 1", "1 + 1 = 2 or tcp[100]=1", "tcp[0] % 3 + 1 = 2", "ip dst net 0.0.0.0/8 and ip dst net 0.0.0.0/8",
	"ip dst net 0.0.0.0/8 and not ip dst net 0.0.0.0/8", "vlan 0 and vlan 0", "ip and ip6", "tcp and udp", "portrange 8000-8080",
	"tcp dst portrange 1-1024", "udp and not port 53", "ip6 and tcp port 80 or udp", "icmp or icmp6", "arp or rarp",
	"iso or stp or ipx or netbeui", "atalk or aarp", "esis or isis or clnp", "l1 or l2 or iih", "decnet or lat or sca",
	"ether[0] & 1 != 0", "len - 14 > 50", "-len < 0", "tcp[tcp[0] & 3] = 0", "ip[ip[0] & 0xf] > 3", "byte 12 = 8",
	"tcp port 5201 or udp port 53 or icmp", "not tcp", "! ip6 && ! arp", "tcp || udp", "sctp port 80",
	"port 80 and (tcp or udp)", "(host 10.0.0.1)", "not not tcp", "ip and not (tcp or udp) and not icmp",
	"tcp port http", "port domain", "tcp portrange ftp-data-ssh", "ip proto \\udp or ip6 proto \\icmp",
	// Grammar corners: ids in parentheses, qualifiers of every kind,
	// every indexable protocol, the link-layer protocols.
	"port (80)", "host (10.0.0.1)", "(80 or 443) and tcp", "tcp and (80 or 443)", "port 80 and (443)",
	"not 80", "port 80 and not (443 or 22)", "port 80 or not not 443", "host 10.0.0.1 and (not 10.0.0.2 or 10.0.0.3)",
	"(tcp port 80) or 443", "tcp port 80 and (udp) or 53", "src or dst host 10.0.0.1", "src and dst net 10",
	"dst or src port 80", "src 10.0.0.1", "dst 80", "src port 80 or dst 443", "tcp src 80", "ether src or dst 1:2:3:4:5:6",
	"ip proto 6 or 17", "proto \\tcp or \\udp", "ether proto 0x800 or 0x86dd", "vlan (100)", "mpls (100) and mpls 200",
	"greater (100)", "less 0x40", "byte 13 > 0x10", "byte 12 == 8", "tcp[tcpflags] = tcp-syn|tcp-ack",
	"(tcp[0] + 1) * 2 = 162", "(tcp[0]) = 0", "((tcp[0])) = 0", "(5) = 5", "((5) + 1) = 6", "-(5) = -5",
	"- 5 % 3 = -2", "len = (60)", "ip[0] & 0xf0 = 0x40 and ip[0] & 0xf > 5", "ip6[6] = 6 && ip6[40:2] = 80",
	"arp[6:2] = 1", "rarp[6:2] = 3", "icmp6[0] = 135", "sctp[2:2] = 80", "igmp[0] = 0x11", "pim[0] & 0xf = 1",
	"vrrp[0] = 0x21", "carp[0] = 0x21", "ah[0] = 1", "ether[12:2] = 0x800", "link[0] & 1 = 1", "fddi[0] = 1", "tr[0] = 1",
	"wlan[0] = 1", "ppp[0] = 1", "slip[0] = 1", "atalk[0] = 1", "decnet[0] = 1", "lat[0]=1", "sca[0] = 1", "moprc[0]=1", "mopdl[0]=1",
	"iso[0] = 1", "stp[0] = 1", "ip6 multicast or ip multicast", "ether multicast and not ether broadcast",
	"tcp port 80 and vlan", "vlan and vlan 100 and vlan", "mpls 16 and mpls 17 and mpls and ip6 and tcp",
	"host 10.0.0.1 and mpls", "mpls and host 10.0.0.1 or 10.0.0.2", "vlan and arp host 10.0.0.1", "ip6 host ::ffff:10.0.0.1",
	"host ::", "ip6 net ::/0", "net 0.0.0.0/0", "net 10.0.0.0/33", "net 10 mask 255.0.0.0", "net 10.1.2.3 mask 255.255.255.255",
	"host 10.1", "host 10.1.2", "net 192.168.1", "src net 172.16/12", "net 172.16.0.0/12 or net fd00::/8",
	"portrange 80-80", "portrange 1024-80", "tcp portrange http-https", "udp port domain", "tcp port domain",
	"sctp port 80", "port 0", "port 65535", "portrange 0-65535", "ether host ff:ff:ff:ff:ff:ff", "ether dst 01.00.5e.00.00.01",
	"ether src 0200.0000.0001", "tcp[13] & 2 = 2 and tcp[13] & 16 = 0", "icmp[icmptype] == icmp-unreach and icmp[icmpcode] = 3",
	"not ip and not ip6 and not arp", "!(tcp||udp)", "tcp && !port 22", "ip and (tcp or udp) and not (port 53 or port 123)",
	"less 64 or greater 1500", "len > 1500 - 14", "ip[2:2] > 576", "ip6[4:2] > 1000", "udp[4:2] - 8 = 0",
	"tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420", "icmp6 and ip6[40] = 128", "ip proto 58 or ip6 proto 1",
	"ip6 proto 44", "proto 44", "ip6 and ip6[6] = 44 and ip6[40] = 6", "tcp or (ip6 and ip6[6] = 44)",
	"esis", "isis", "clnp", "l1 or l2", "iih", "lsp", "snp", "csnp", "psnp", "iso proto \\esis", "isis proto 15",
	"ether proto \\iso", "ether proto \\stp", "ether proto \\ipx", "ether proto \\netbeui", "ether proto \\loopback",
	"ether proto 0x9000", "ipx", "netbeui", "atalk", "aarp", "stp",
}

// compareResult is what one expression gave.
type compareResult struct {
	expr    string
	bothErr bool
	// buggy: tcpdump's program is wrong (it reads a register it never
	// set, or clobbers one), and note says how.
	buggy      bool
	note       string
	mineErr    error
	theirErr   error
	frames     int
	disagree   []int
	mine, them *Program
	// unopt is tcpdump's program unoptimized (-O), when the test
	// compares with it too; explained counts the frames where the
	// built-in program disagrees with tcpdump's but agrees with it.
	unopt     *Program
	explained int
	// short counts the live frames where the built-in program agrees
	// with neither of tcpdump's, and one of the three stopped at a load
	// past the frame's end.
	short int
}

// judge runs p over the frame numbered i: the bytes it keeps, whether it
// accepts the frame, whether it stopped at a load past the frame's end
// (when the judge can tell).
type judge func(p *Program, i int) (keep int, ok, short bool)

// matchJudge runs programs in user space (Program.Match) over frames.
func matchJudge(frames [][]byte) judge {
	return func(p *Program, i int) (int, bool, bool) {
		keep, ok := p.Match(frames[i])
		return keep, ok, false
	}
}

// compareExpr compiles expr with both compilers and runs both programs
// over the n frames run judges. With unopt set (for live programs, where
// libpcap's optimizer has bugs of its own), a frame where tcpdump's
// program and the built-in one disagree is explained when tcpdump's
// unoptimized program agrees with the built-in one.
func compareExpr(expr string, opts Options, n int, run judge, unopt bool) compareResult {
	res := compareResult{expr: expr}
	mo, to := opts, opts
	mo.Compiler, to.Compiler = CompilerBuiltin, CompilerTcpdump
	res.mine, res.mineErr = Compile(mo, expr)
	res.them, res.theirErr = Compile(to, expr)
	rejectsAll := func(err error) bool { return err != nil && strings.Contains(err.Error(), "rejects all packets") }
	if unopt && res.mineErr == nil && res.theirErr != nil && !rejectsAll(res.theirErr) {
		// libpcap's optimizer can fail on a live program ("no
		// destination found for block-local relative jump"): its
		// unoptimized program is the reference then.
		if res.unopt = compileUnoptimized(expr, opts); res.unopt != nil {
			res.them, res.theirErr = res.unopt, nil
			res.note = "tcpdump's optimizer fails on it; compared with its unoptimized program"
		}
	}
	switch {
	case res.mineErr != nil && res.theirErr != nil:
		res.bothErr = true
		return res
	case rejectsAll(res.theirErr) && res.mine != nil:
		res.them, _ = Parse("{ 0x6, 0, 0, 0 }")
	case rejectsAll(res.mineErr) && res.them != nil:
		res.mine, _ = Parse("{ 0x6, 0, 0, 0 }")
	case res.mineErr != nil || res.theirErr != nil:
		return res
	}
	if readsUnset(res.them.raw) {
		res.buggy = true
		res.note = "skipped: tcpdump's program reads a register before setting it"
		return res
	}
	res.frames = n
	for i := 0; i < n; i++ {
		k1, ok1, short1 := run(res.mine, i)
		k2, ok2, short2 := run(res.them, i)
		if k1 == k2 && ok1 == ok2 {
			continue
		}
		if unopt && res.unopt == nil {
			res.unopt = compileUnoptimized(expr, opts)
		}
		if res.unopt != nil {
			k3, ok3, short3 := run(res.unopt, i)
			if k1 == k3 && ok1 == ok3 {
				res.explained++
				continue
			}
			if short1 || short2 || short3 {
				res.short++
				continue
			}
			if vlanRegisterClash(res.unopt.raw) {
				res.buggy, res.disagree = true, nil
				res.note = "skipped: tcpdump's program uses a vlan offset's scratch word for arithmetic"
				return res
			}
		}
		res.disagree = append(res.disagree, i)
	}
	return res
}

// compileUnoptimized returns tcpdump's unoptimized program for expr, nil
// if tcpdump does not compile it.
func compileUnoptimized(expr string, opts Options) *Program {
	args := []string{"-y", "EN10MB", "-O"}
	if opts.Interface != "" {
		args = []string{"-i", opts.Interface, "-p", "-O"}
	}
	raw, msg, err := runTcpdump("tcpdump", 10*time.Second, expr, args...)
	if err != nil || msg != "" {
		return nil
	}
	p, err := New(raw, expr)
	if err != nil {
		return nil
	}
	return p
}

// runCompare compares every expression over n frames, on two goroutines.
func runCompare(exprs []string, opts Options, n int, run judge, unopt bool) []compareResult {
	out := make([]compareResult, len(exprs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = compareExpr(exprs[i], opts, n, run, unopt)
			}
		}()
	}
	for i := range exprs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// report checks and summarizes the results: every expression compiles
// with both or with neither, and no frame gets two outcomes.
func report(t *testing.T, what string, results []compareResult, frames [][]byte, run judge) {
	t.Helper()
	compiled, rejected, pairs, bad, shown, buggy, explained, explainedExprs, short, shortExprs := 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
	for _, r := range results {
		if r.mine != nil && readsUnset(r.mine.raw) {
			t.Errorf("%s: %q: the built-in program reads a register before setting it:\n%s", what, r.expr, r.mine.Disassemble())
		}
		switch {
		case r.buggy:
			buggy++
			t.Logf("%s: %q: %s", what, r.expr, r.note)
			continue
		case r.bothErr:
			rejected++
			if errors.Is(r.mineErr, ErrNoCompiler) {
				t.Errorf("%s: %q: the built-in compiler does not cover it: %v", what, r.expr, r.mineErr)
			}
			continue
		case r.mineErr != nil || r.theirErr != nil:
			bad++
			t.Errorf("%s: %q: built-in: %v; tcpdump: %v", what, r.expr, r.mineErr, r.theirErr)
			continue
		}
		compiled++
		pairs += r.frames
		if r.note != "" {
			t.Logf("%s: %q: %s", what, r.expr, r.note)
		}
		if r.short > 0 {
			short += r.short
			shortExprs++
			t.Logf("%s: %q: %d frames cut shorter than a field it reads judged otherwise than by either of tcpdump's programs", what, r.expr, r.short)
		}
		if r.explained > 0 {
			explained += r.explained
			explainedExprs++
			t.Logf("%s: %q: %d frames where tcpdump's program differs from its unoptimized one, which the built-in agrees with", what, r.expr, r.explained)
		}
		if len(r.disagree) == 0 {
			continue
		}
		bad++
		if shown++; shown <= 5 {
			f := frames[r.disagree[0]]
			k1, ok1, _ := run(r.mine, r.disagree[0])
			k2, ok2, _ := run(r.them, r.disagree[0])
			t.Errorf("%s: %q: %d of %d frames judged otherwise; frame %d (% x): built-in %d,%v, tcpdump %d,%v\nbuilt-in:\n%s\ntcpdump:\n%s",
				what, r.expr, len(r.disagree), r.frames, r.disagree[0], f, k1, ok1, k2, ok2, r.mine.Disassemble(), r.them.Disassemble())
		} else {
			t.Errorf("%s: %q: %d of %d frames judged otherwise", what, r.expr, len(r.disagree), r.frames)
		}
	}
	t.Logf("%s: %d expressions (%d compiled by both, %d rejected by both, %d skipped for tcpdump's register bugs), %d frames, %d expression-frame pairs, %d expressions in disagreement",
		what, len(results), compiled, rejected, buggy, len(frames), pairs, bad)
	if explainedExprs > 0 {
		t.Logf("%s: %d expression-frame pairs (%d expressions) where the built-in program agrees with tcpdump's unoptimized program, not its optimized one", what, explained, explainedExprs)
	}
	if shortExprs > 0 {
		t.Logf("%s: %d expression-frame pairs (%d expressions) judged otherwise than by both of tcpdump's programs, all on frames cut shorter than a field the expression reads", what, short, shortExprs)
	}
}

// uniq returns exprs without repeats, in order.
func uniq(exprs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range exprs {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// TestDifferential compiles thousands of expressions with the built-in
// compiler and with tcpdump (`tcpdump -y EN10MB -dd`), and runs both
// programs over the captures and generated frames in the same virtual
// machine: each frame must get the same outcome (accepted or not, and
// the length kept) from both, and an expression one compiler rejects the
// other must reject too.
func TestDifferential(t *testing.T) {
	requireTcpdump(t)
	frames := diffFrames(t)
	g := &exprGen{r: rand.New(rand.NewSource(int64(envInt(t, "FILTER_DIFF_SEED", 2))))}
	exprs := append([]string{}, handExprs...)
	for i, n := 0, envInt(t, "FILTER_DIFF_EXPRS", 2000); i < n; i++ {
		exprs = append(exprs, g.expr(i%4))
	}
	exprs = uniq(exprs)
	run := matchJudge(frames)
	report(t, "file", runCompare(exprs, Options{}, len(frames), run, false), frames, run)
}

// readsUnset reports whether a program reads X or a scratch word on some
// path before writing it: the mark of a libpcap optimizer bug (its
// dead-store pass can drop the ldx a later block relies on), whose
// program then reads the wrong bytes.
func readsUnset(raw []bpf.RawInstruction) bool {
	const xBit = 1 << 16
	n := len(raw)
	in := make([]uint32, n+1)
	seen := make([]bool, n+1)
	seen[0] = true
	for i, ins := range raw {
		if !seen[i] {
			continue
		}
		def := in[i]
		uses, defs := uint32(0), uint32(0)
		switch cls := ins.Op & 7; {
		case cls == 0: // ld
			if ins.Op&0xe0 == 0x40 {
				uses = xBit
			} else if ins.Op&0xe0 == 0x60 {
				uses = 1 << (ins.K & 15)
			}
		case cls == 1: // ldx
			defs = xBit
			if ins.Op&0xe0 == 0x60 {
				uses = 1 << (ins.K & 15)
			}
		case cls == 2: // st
			defs = 1 << (ins.K & 15)
		case cls == 3: // stx
			uses, defs = xBit, 1<<(ins.K&15)
		case cls == 4 && ins.Op&8 != 0, cls == 5 && ins.Op&8 != 0: // alu x, jmp x
			uses = xBit
		case cls == 7:
			if ins.Op&0xf8 == 0x80 { // txa
				uses = xBit
			} else {
				defs = xBit
			}
		}
		if uses&^def != 0 {
			return true
		}
		out := def | defs
		next := func(j int) {
			if j > n {
				return
			}
			if !seen[j] {
				seen[j], in[j] = true, out
			} else {
				in[j] &= out
			}
		}
		switch {
		case ins.Op == 0x05:
			next(i + 1 + int(ins.K))
		case ins.Op&7 == 5:
			next(i + 1 + int(ins.Jt))
			next(i + 1 + int(ins.Jf))
		case ins.Op&7 != 6:
			next(i + 1)
		}
	}
	return false
}

// TestDifferentialLive compares the live form of expressions, as the
// built-in compiler writes it and as `tcpdump -i lo -dd` does (it opens
// lo, so it needs capture privileges), over the frames as a live socket's
// filter sees them: untouched, and with the outer tag taken out into the
// socket buffer's metadata, as the kernel does. The programs read that
// metadata, so they run in a virtual machine of this test that has
// Linux's ancillary loads; the test first checks it against
// golang.org/x/net/bpf's on file programs.
func TestDifferentialLive(t *testing.T) {
	requireTcpdump(t)
	if _, err := Compile(Options{Interface: "lo", Compiler: CompilerTcpdump}, "vlan"); err != nil {
		netns.SkipOrFatal(t, "tcpdump cannot compile for lo: "+err.Error())
	}
	frames := diffFrames(t)
	g := &exprGen{r: rand.New(rand.NewSource(int64(envInt(t, "FILTER_DIFF_SEED", 3))))}
	exprs := append([]string{}, liveExprs...)
	for i, n := 0, envInt(t, "FILTER_DIFF_EXPRS", 2000)/5; i < n; i++ {
		e := g.expr(i % 3)
		switch i % 4 {
		case 0:
			e = g.pick("vlan", "vlan 100", "vlan 0", "vlan 200") + " and " + e
		case 1:
			e = e + " and " + g.pick("vlan", "vlan 100", "vlan and vlan", "vlan 1")
		case 2:
			e = g.pick("vlan or ", "not vlan and ", "(vlan 100 or vlan 200) and ") + e
		}
		exprs = append(exprs, e)
	}
	exprs = uniq(exprs)

	// The test's machine against golang.org/x/net/bpf's.
	for _, e := range exprs[:50] {
		p, err := Compile(Options{Compiler: CompilerBuiltin}, e)
		if err != nil {
			continue
		}
		for i, f := range frames {
			keep, ok := p.Match(f)
			if v := runLive(p.raw, f, skbMeta{}); ok != (v > 0) || (ok && keep != min(int(v), len(f))) {
				t.Fatalf("%q, frame %d: the test's machine returns %d, x/net/bpf's %d, %v", e, i, v, keep, ok)
			}
		}
	}

	type view struct {
		data []byte
		meta skbMeta
	}
	var views []view
	var viewFrames [][]byte
	for _, f := range frames {
		for _, stripped := range []bool{false, true} {
			if d, m, ok := liveView(f, stripped); ok {
				views = append(views, view{d, m})
				viewFrames = append(viewFrames, d)
			}
		}
	}
	run := func(p *Program, i int) (int, bool, bool) {
		v, short := runLiveShort(p.raw, views[i].data, views[i].meta)
		return min(int(v), len(views[i].data)), v > 0, short
	}
	report(t, "live", runCompare(exprs, Options{Interface: "lo"}, len(views), run, true), viewFrames, run)
}

// liveExprs are expressions whose live form differs from their file
// form.
var liveExprs = []string{
	"vlan", "vlan 100", "vlan 0", "vlan and vlan", "vlan 100 and vlan 200", "vlan and tcp port 80", "vlan 100 and ip",
	"vlan or ip", "not vlan", "not vlan and ip6", "vlan 100 or vlan 200", "ip or vlan and udp", "(ip or vlan) and tcp",
	"vlan and mpls", "vlan and host 10.0.0.1", "vlan and ether proto 0x88cc", "vlan and ip[9] = 6", "vlan and tcp[13] & 2 != 0",
	"vlan and vlan and vlan", "vlan 4095", "tcp and vlan", "ether host 02:00:00:00:00:01 and vlan",
}

// vlanRegisterClash reports whether an unoptimized live program of
// libpcap's stores into a scratch word that holds a vlan offset (one
// that "ld M[r]; add #4; st M[r]" raises) elsewhere than where it sets
// it to zero first: libpcap's register allocator gives the offset a word
// that arithmetic before the vlan already uses, and the program then
// reads at offsets that arithmetic left.
func vlanRegisterClash(raw []bpf.RawInstruction) bool {
	offsets := map[uint32]bool{}
	for i := 0; i+2 < len(raw); i++ {
		if raw[i].Op == 0x60 && raw[i+1].Op == 0x04 && raw[i+1].K == 4 && raw[i+2].Op == 0x02 && raw[i+2].K == raw[i].K {
			offsets[raw[i].K] = true
		}
	}
	for i, ins := range raw {
		if (ins.Op != 0x02 && ins.Op != 0x03) || !offsets[ins.K] {
			continue
		}
		prologue := true // ld #0; st M[r]; st M[s]
		for j := 0; j < i; j++ {
			if (j == 0 && raw[j] != bpf.RawInstruction{Op: 0x00}) || (j > 0 && raw[j].Op != 0x02) {
				prologue = false
			}
		}
		raised := i >= 2 && raw[i-1].Op == 0x04 && raw[i-1].K == 4 && raw[i-2].Op == 0x60 && raw[i-2].K == ins.K
		if !prologue && !raised {
			return true
		}
	}
	return false
}
