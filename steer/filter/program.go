package filter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// Sentinel errors, for errors.Is.
var (
	// ErrProgram wraps every error about a program text or instructions
	// that are not a valid classic BPF program.
	ErrProgram = errors.New("filter: invalid BPF program")
	// ErrExpression wraps the error of an expression the compiler
	// rejected (a syntax error, an unknown host name).
	ErrExpression = errors.New("filter: invalid filter expression")
	// ErrNoCompiler is returned for an expression no available compiler
	// covers: one the built-in compiler leaves to tcpdump (a host name,
	// protochain) when tcpdump is not installed, or the compiler asked
	// for in Options does not cover.
	ErrNoCompiler = errors.New("filter: no compiler for filter expressions")
	// ErrUserSpace is returned by NewSource for a program the user-space
	// virtual machine cannot run.
	ErrUserSpace = errors.New("filter: program cannot run in user space")
)

// MaxLen is the most instructions a program may have (the kernel's
// BPF_MAXINSNS).
const MaxLen = 4096

// Program is a classic BPF program, as SO_ATTACH_FILTER takes it: each
// frame runs through it and its return value is the number of bytes to keep,
// zero rejecting the frame. A Program is immutable and safe for concurrent
// use.
type Program struct {
	text  string
	raw   []bpf.RawInstruction
	vm    *bpf.VM
	vmErr error
}

// New returns a program of the instructions raw, checked as the kernel
// checks them: 1 to MaxLen instructions, every jump inside the program,
// the last instruction a return. text names it (String returns it).
func New(raw []bpf.RawInstruction, text string) (*Program, error) {
	if err := check(raw); err != nil {
		return nil, err
	}
	p := &Program{text: text, raw: append([]bpf.RawInstruction(nil), raw...)}
	insns, ok := bpf.Disassemble(p.raw)
	for i, ins := range insns {
		if _, neg := ins.(bpf.NegateA); neg {
			// x/net/bpf's machine fails on neg: A*0xffffffff is -A.
			insns[i] = bpf.ALUOpConstant{Op: bpf.ALUOpMul, Val: 0xffffffff}
		}
	}
	if !ok {
		p.vmErr = fmt.Errorf("%w: it has instructions the virtual machine does not know", ErrUserSpace)
	} else if vm, err := bpf.NewVM(insns); err != nil {
		p.vmErr = fmt.Errorf("%w: %w", ErrUserSpace, err)
	} else {
		p.vm = vm
	}
	return p, nil
}

// Classic BPF opcode fields (linux/filter.h, net/bpf.h).
const (
	skfAdOff = 0xfffff000 // SKF_AD_OFF, Linux's ancillary loads
	clsMask  = 0x07
	clsJmp   = 0x05
	clsRet   = 0x06
	jmpMask  = 0xf0
	jmpJA    = 0x00
)

// check validates raw as a program the kernel would take, as far as its
// structure goes (the kernel also checks every opcode).
func check(raw []bpf.RawInstruction) error {
	n := len(raw)
	if n == 0 || n > MaxLen {
		return fmt.Errorf("%w: %d instructions, want 1 to %d", ErrProgram, n, MaxLen)
	}
	for i, ins := range raw {
		if ins.Op&clsMask != clsJmp {
			continue
		}
		left := n - i - 1
		if ins.Op&jmpMask == jmpJA {
			if uint64(ins.K) >= uint64(left) {
				return fmt.Errorf("%w: instruction %d jumps %d past the end", ErrProgram, i, ins.K)
			}
			continue
		}
		if int(ins.Jt) >= left || int(ins.Jf) >= left {
			return fmt.Errorf("%w: instruction %d jumps (%d, %d) past the end", ErrProgram, i, ins.Jt, ins.Jf)
		}
	}
	if raw[n-1].Op&clsMask != clsRet {
		return fmt.Errorf("%w: the last instruction (opcode %#x) is not a return", ErrProgram, raw[n-1].Op)
	}
	return nil
}

// Parse parses a program as tcpdump prints it with -dd (lines of
// "{ code, jt, jf, k }," C initialisers) or -ddd (the instruction count, then
// four decimal numbers per instruction, separated by spaces, newlines or
// commas).
func Parse(text string) (*Program, error) {
	var raw []bpf.RawInstruction
	var err error
	if strings.Contains(text, "{") {
		raw, err = parseDD(text)
	} else {
		raw, err = parseDDD(text)
	}
	if err != nil {
		return nil, err
	}
	return New(raw, strings.TrimSpace(text))
}

// IsProgram reports whether text looks like a program Parse reads rather
// than a filter expression: it has braces (-dd), or only decimal numbers,
// the first of them the count of the groups of four that follow (-ddd).
// No expression in pcap-filter syntax has either shape.
func IsProgram(text string) bool {
	if strings.Contains(text, "{") {
		return true
	}
	f := fields(text)
	if len(f) < 5 {
		return false
	}
	for _, s := range f {
		if s == "" || strings.Trim(s, "0123456789") != "" {
			return false
		}
	}
	n, err := strconv.Atoi(f[0])
	return err == nil && len(f) == 1+4*n
}

// fields splits a -ddd text at spaces, newlines and commas.
func fields(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
}

func parseDD(text string) ([]bpf.RawInstruction, error) {
	var raw []bpf.RawInstruction
	rest := text
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if s := strings.Trim(rest, " \t\r\n,"); s != "" {
				return nil, fmt.Errorf("%w: unexpected %q after instruction %d", ErrProgram, clip(s), len(raw))
			}
			return raw, nil
		}
		if s := strings.Trim(rest[:open], " \t\r\n,"); s != "" {
			return nil, fmt.Errorf("%w: unexpected %q before instruction %d", ErrProgram, clip(s), len(raw)+1)
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%w: instruction %d has no closing brace", ErrProgram, len(raw)+1)
		}
		ins, err := parseIns(strings.Split(rest[open+1:open+end], ","), len(raw)+1)
		if err != nil {
			return nil, err
		}
		raw = append(raw, ins)
		if len(raw) > MaxLen {
			return nil, fmt.Errorf("%w: more than %d instructions", ErrProgram, MaxLen)
		}
		rest = rest[open+end+1:]
	}
}

func parseDDD(text string) ([]bpf.RawInstruction, error) {
	f := fields(text)
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: empty program", ErrProgram)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 || n > MaxLen {
		return nil, fmt.Errorf("%w: %q is not an instruction count of 1 to %d", ErrProgram, clip(f[0]), MaxLen)
	}
	if len(f) != 1+4*n {
		return nil, fmt.Errorf("%w: %d instructions announced, %d numbers follow (want %d)", ErrProgram, n, len(f)-1, 4*n)
	}
	raw := make([]bpf.RawInstruction, n)
	for i := range raw {
		if raw[i], err = parseIns(f[1+4*i:5+4*i], i+1); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// parseIns parses the four numbers of instruction i (counting from 1).
func parseIns(f []string, i int) (bpf.RawInstruction, error) {
	if len(f) != 4 {
		return bpf.RawInstruction{}, fmt.Errorf("%w: instruction %d has %d fields, want 4", ErrProgram, i, len(f))
	}
	var v [4]uint64
	for j, bits := range [4]int{16, 8, 8, 32} {
		s := strings.TrimSpace(f[j])
		n, err := strconv.ParseUint(s, 0, bits)
		if err != nil {
			return bpf.RawInstruction{}, fmt.Errorf("%w: instruction %d: %q is not a %d-bit number", ErrProgram, i, clip(s), bits)
		}
		v[j] = n
	}
	return bpf.RawInstruction{Op: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3])}, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// String returns the text the program was made from: the expression, or
// the program text.
func (p *Program) String() string { return p.text }

// Instructions returns a copy of the program's instructions.
func (p *Program) Instructions() []bpf.RawInstruction {
	return append([]bpf.RawInstruction(nil), p.raw...)
}

// Len returns the number of instructions.
func (p *Program) Len() int { return len(p.raw) }

// Disassemble returns the program as `tcpdump -d` prints it (libpcap's
// bpf_image): one instruction a line, "(NNN) op operand", a branch with
// the numbers of the instructions it goes to.
func (p *Program) Disassemble() string {
	var b strings.Builder
	for i, ins := range p.raw {
		b.WriteString(image(ins, i))
		b.WriteByte('\n')
	}
	return b.String()
}

// ancillary names Linux's ancillary loads (SKF_AD_*) by their offset from
// SKF_AD_OFF, as libpcap prints them.
var ancillary = map[uint32]string{
	0: "proto", 4: "type", 8: "ifidx", 12: "nla", 16: "nlan", 20: "mark", 24: "queue",
	28: "hatype", 32: "rxhash", 36: "cpu", 40: "xor_x", 44: "vlan_tci", 48: "vlanp",
	52: "poff", 56: "random", 60: "vlan_tpid",
}

// image formats instruction ins, the n-th, as libpcap's bpf_image.
func image(ins bpf.RawInstruction, n int) string {
	k := ins.K
	sk := int32(k) // libpcap prints most operands with %d
	hex := fmt.Sprintf("#0x%x", k)
	dec := fmt.Sprintf("#%d", sk)
	abs := fmt.Sprintf("[%d]", sk)
	if name, ok := ancillary[k-skfAdOff]; ok && k >= skfAdOff {
		abs = "[" + name + "]"
	}
	ind := fmt.Sprintf("[x + %d]", sk)
	mem := fmt.Sprintf("M[%d]", sk)
	op, operand := "unimp", fmt.Sprintf("0x%x", ins.Op)
	aluName := [...]string{"add", "sub", "mul", "div", "or", "and", "lsh", "rsh", "neg", "mod", "xor"}
	switch c := ins.Op; {
	case c == 0x06: // ret #k
		op, operand = "ret", dec
	case c == 0x16: // ret a
		op, operand = "ret", ""
	case c == 0x20, c == 0x28, c == 0x30: // ld[hb] [k]
		op, operand = [...]string{"ld", "ldh", "ldb"}[(c>>3)&3], abs
	case c == 0x80: // ld len
		op, operand = "ld", "#pktlen"
	case c == 0x40, c == 0x48, c == 0x50: // ld[hb] [x+k]
		op, operand = [...]string{"ld", "ldh", "ldb"}[(c>>3)&3], ind
	case c == 0x00:
		op, operand = "ld", hex
	case c == 0x01:
		op, operand = "ldx", hex
	case c == 0xb1:
		op, operand = "ldxb", fmt.Sprintf("4*([%d]&0xf)", sk)
	case c == 0x60:
		op, operand = "ld", mem
	case c == 0x61:
		op, operand = "ldx", mem
	case c == 0x02:
		op, operand = "st", mem
	case c == 0x03:
		op, operand = "stx", mem
	case c == 0x05: // ja
		op, operand = "ja", fmt.Sprintf("%d", int32(n+1)+sk)
	case c&^0x78 == 0x05 && (c>>4)&7 >= 1 && (c>>4)&7 <= 4: // jeq, jgt, jge, jset
		op = [...]string{"", "jeq", "jgt", "jge", "jset"}[(c>>4)&7]
		operand = hex
		if c&0x08 != 0 {
			operand = "x"
		}
	case c&^0xf8 == 0x04 && c>>4 <= 0xa && c != 0x8c: // alu
		op = aluName[c>>4]
		switch {
		case c == 0x84:
			operand = ""
		case c&0x08 != 0:
			operand = "x"
		case c>>4 == 4 || c>>4 == 5 || c>>4 == 0xa: // or, and, xor
			operand = hex
		default:
			operand = dec
		}
	case c == 0x07:
		op, operand = "tax", ""
	case c == 0x87:
		op, operand = "txa", ""
	}
	if ins.Op&0x07 == 0x05 && ins.Op&0xf0 != 0 {
		return fmt.Sprintf("(%03d) %-8s %-16s jt %d\tjf %d", n, op, operand, n+1+int(ins.Jt), n+1+int(ins.Jf))
	}
	return fmt.Sprintf("(%03d) %-8s %s", n, op, operand)
}

// UserSpace returns nil if Match can run the program, or an error wrapping
// ErrUserSpace that says why not (a Linux ancillary load, such as the
// out-of-band VLAN tag of a live program).
func (p *Program) UserSpace() error { return p.vmErr }

// Match runs the program over frame in user space. It reports whether the
// program accepts the frame and, if so, how many of its bytes to keep: the
// program's return value, at most len(frame). A program that cannot run in
// user space (UserSpace returns an error) accepts nothing.
func (p *Program) Match(frame []byte) (keep int, ok bool) {
	if p.vm == nil {
		return 0, false
	}
	n, err := p.vm.Run(frame)
	if err != nil || n <= 0 {
		return 0, false
	}
	return min(n, len(frame)), true
}
