package bpfc

// Classic BPF opcode fields (linux/filter.h).
const (
	clsLD   = 0x00
	clsLDX  = 0x01
	clsST   = 0x02
	clsSTX  = 0x03
	clsALU  = 0x04
	clsJMP  = 0x05
	clsRET  = 0x06
	clsMISC = 0x07

	szW = 0x00
	szH = 0x08
	szB = 0x10

	modeIMM = 0x00
	modeABS = 0x20
	modeIND = 0x40
	modeMEM = 0x60
	modeLEN = 0x80
	modeMSH = 0xa0

	aluADD = 0x00
	aluSUB = 0x10
	aluMUL = 0x20
	aluDIV = 0x30
	aluOR  = 0x40
	aluAND = 0x50
	aluLSH = 0x60
	aluRSH = 0x70
	aluNEG = 0x80
	aluMOD = 0x90
	aluXOR = 0xa0

	jmpJA   = 0x00
	jmpJEQ  = 0x10
	jmpJGT  = 0x20
	jmpJGE  = 0x30
	jmpJSET = 0x40

	srcK = 0x00
	srcX = 0x08

	miscTAX = 0x00
	miscTXA = 0x80
)

// Linux's ancillary loads (SKF_AD_*), as offsets of an absolute load.
const (
	skfAdOff             = 0xfffff000 // -0x1000
	skfAdVLANTag         = 44
	skfAdVLANTagPresent  = 48
	defaultSnaplen       = 262144
	ethermtu             = 1500
	offsetVLANTag        = skfAdOff + skfAdVLANTag
	offsetVLANTagPresent = skfAdOff + skfAdVLANTagPresent
)

// val is a value the program computes, as libpcap's optimizer numbers it:
// two vals are the same pointer exactly when libpcap gives them the same
// value number (the same operation on the same operands), so that tests
// on them are the same tests for its branch optimizations.
//
// op is the BPF instruction that computes it: LD|IMM (a constant k),
// LD|ABS|size (the packet at k), LD|IND|size (the packet at a + k),
// LDX|MSH|B (4*([k]&0xf)), LD|LEN, ALU|op|K (a op k), ALU|op|X (a op b),
// ALU|NEG (-a); opVar is the variable part of the link-layer offsets of a
// live program, which compileCond replaces.
type val struct {
	op   uint16
	k    uint32
	a, b *val
	// hasVar is set when opVar occurs in the value.
	hasVar bool
}

const opVar = 0xffff

type valKey struct {
	op   uint16
	k    uint32
	a, b *val
}

// vals interns values.
type vals map[valKey]*val

func (vs vals) get(op uint16, k uint32, a, b *val) *val {
	key := valKey{op, k, a, b}
	if v := vs[key]; v != nil {
		return v
	}
	v := &val{op: op, k: k, a: a, b: b}
	v.hasVar = op == opVar || (a != nil && a.hasVar) || (b != nil && b.hasVar)
	vs[key] = v
	return v
}

func (vs vals) konst(k uint32) *val { return vs.get(clsLD|modeIMM, k, nil, nil) }
func (vs vals) abs(size uint16, k uint32) *val {
	return vs.get(clsLD|modeABS|size, k, nil, nil)
}
func (vs vals) ind(size uint16, k uint32, x *val) *val {
	return vs.get(clsLD|modeIND|size, k, x, nil)
}
func (vs vals) msh(k uint32) *val { return vs.get(clsLDX|modeMSH|szB, k, nil, nil) }
func (vs vals) length() *val      { return vs.get(clsLD|modeLEN|szW, 0, nil, nil) }
func (vs vals) aluK(op uint16, a *val, k uint32) *val {
	return vs.get(clsALU|op|srcK, k, a, nil)
}
func (vs vals) aluX(op uint16, a, b *val) *val { return vs.get(clsALU|op|srcX, 0, a, b) }
func (vs vals) neg(a *val) *val                { return vs.get(clsALU|aluNEG, 0, a, nil) }
func (vs vals) variable() *val                 { return vs.get(opVar, 0, nil, nil) }

func (v *val) isConst() bool { return v.op == clsLD|modeIMM }

// test is a block's branch: op (JMP|jeq/jgt/jge/jset|K or X) compares a,
// the value in A, with k or with x, the value in X.
type test struct {
	op uint16
	a  *val
	k  uint32
	x  *val
	// a1, when set, is A's value in the optimizer's first pass, before
	// it drops the subtraction of an equality relation (a = b is
	// computed as a - b == 0).
	a1 *val
	// swap marks a jset that libpcap made of "and #k; jeq #0": the block
	// is built with its branches as the jeq has them, and the first pass
	// swaps them after computing dominators.
	swap bool
}

// condKind is the kind of a node of the condition tree the parser builds,
// the shape libpcap's gen_and, gen_or and gen_not give the blocks.
type condKind uint8

const (
	cTest condKind = iota
	cAnd
	cOr
	cNot
	cIf   // a ? b : c, for the live VLAN ID test
	cAddV // the child with the variable offset raised by k (a live vlan)
)

type cond struct {
	kind    condKind
	t       test
	a, b, c *cond
	k       uint32
}

func and(a, b *cond) *cond { return &cond{kind: cAnd, a: a, b: b} }
func or(a, b *cond) *cond  { return &cond{kind: cOr, a: a, b: b} }
func not(a *cond) *cond    { return &cond{kind: cNot, a: a} }
