package bpfc

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// MaxInstructions is the longest program the kernel takes (BPF_MAXINSNS).
const MaxInstructions = 4096

// emitter lays the blocks out and writes their instructions: each block
// computes its test's value (reusing what A and X hold from every block
// before it) and branches; a branch too far for an 8-bit offset goes
// through a jump (or a copy of the return) placed after it.
type emitter struct {
	order []*eblock
	byBlk map[*block]*eblock
	pre   []*val // loads the program makes before its first test
	err   error
}

type eblock struct {
	b      *block
	t      test
	ret    bool
	k      uint32
	jt, jf *eblock
	// The registers' contents on entry and exit (nil: unknown).
	inA, inX, outA, outX *val
	inKnown              bool
	ins                  []bpf.RawInstruction // without the branch
	pos                  int
	farT, farF           bool
}

type internKey struct {
	op     uint16
	a, x   *val
	k      uint32
	jt, jf *block
}

// intern returns b with every block that tests what another tests and
// branches to the same blocks replaced by that one, as libpcap's
// intern_blocks merges them.
func intern(b *block, blocks map[internKey]*block, done map[*block]*block) *block {
	if b.leaf() {
		return b
	}
	if r, ok := done[b]; ok {
		return r
	}
	jt := intern(resolve(b.jt), blocks, done)
	jf := intern(resolve(b.jf), blocks, done)
	key := internKey{op: b.t.op, a: b.t.a, x: b.t.x, k: b.t.k, jt: jt, jf: jf}
	r, ok := blocks[key]
	if !ok {
		r = b
		r.jt, r.jf = jt, jf
		blocks[key] = r
	}
	done[b] = r
	return r
}

// resolve follows b through blocks that branch the same way without
// loading anything. A block that loads a value and then goes the same
// way on both branches (its successors met only in the second phase,
// which moves no branch) stays: libpcap's program makes its loads, which
// reject a frame too short for them.
func resolve(b *block) *block {
	for !b.leaf() && b.jt == b.jf && loadsNothing(b.t) {
		b = b.jt
	}
	return b
}

// loadsNothing says whether t compares constants.
func loadsNothing(t test) bool {
	return t.a.isConst() && (t.x == nil || t.x.isConst())
}

func emit(root *block) ([]bpf.RawInstruction, error) {
	e := &emitter{byBlk: map[*block]*eblock{}}
	// libpcap moves its root past tests that branch the same way both
	// ways, keeping the first one's loads unless a return follows.
	if !root.leaf() && root.jt == root.jf {
		first := root
		for !root.leaf() && root.jt == root.jf {
			root = root.jt
		}
		if !root.leaf() && !loadsNothing(first.t) {
			e.pre = append(e.pre, first.t.a)
			if first.t.x != nil {
				e.pre = append(e.pre, first.t.x)
			}
		}
	}
	root = intern(resolve(root), map[internKey]*block{}, map[*block]*block{})
	if root.leaf() {
		if root.k == 0 {
			return nil, exprErrorf("expression rejects all packets")
		}
		return []bpf.RawInstruction{{Op: clsRET | srcK, K: root.k}}, nil
	}
	// Blocks in the order libpcap lays them out: depth first, each
	// block before its true branch's blocks, those before its false
	// branch's.
	var post []*eblock
	var visit func(b *block) *eblock
	visit = func(b *block) *eblock {
		b = resolve(b)
		if eb, ok := e.byBlk[b]; ok {
			return eb
		}
		eb := &eblock{b: b, t: b.t, ret: b.leaf(), k: b.k}
		e.byBlk[b] = eb
		if !eb.ret {
			eb.jf = visit(b.jf)
			eb.jt = visit(b.jt)
			// "and #m; jeq #0" is "jset #m" the other way round.
			if a := eb.t.a; eb.t.op == clsJMP|jmpJEQ|srcK && eb.t.k == 0 && a.op == clsALU|aluAND|srcK && b.jt != b.jf {
				eb.t = test{op: clsJMP | jmpJSET | srcK, a: a.a, k: a.k}
				eb.jt, eb.jf = eb.jf, eb.jt
			}
		}
		post = append(post, eb)
		return eb
	}
	visit(root)
	for i := len(post) - 1; i >= 0; i-- {
		e.order = append(e.order, post[i])
	}
	e.code()
	if e.err != nil {
		return nil, e.err
	}
	e.merge()
	return e.layout()
}

// merge makes one block of blocks whose instructions and branches are the
// same (as libpcap's intern_blocks does once their loads of values
// already in A or X are gone): two tests of the value each finds in A,
// against the same constant, going to the same blocks. Each path still
// brings its own value, as before.
func (e *emitter) merge() {
	type key struct {
		ins    string
		op     uint16
		k      uint32
		jt, jf *eblock
	}
	canon := map[*eblock]*eblock{}
	seen := map[key]*eblock{}
	for i := len(e.order) - 1; i >= 0; i-- {
		eb := e.order[i]
		if eb.ret {
			canon[eb] = eb
			continue
		}
		eb.jt, eb.jf = canon[eb.jt], canon[eb.jf]
		k := key{ins: fmt.Sprint(eb.ins), op: eb.t.op, k: eb.t.k, jt: eb.jt, jf: eb.jf}
		if c, ok := seen[k]; ok {
			canon[eb] = c
			continue
		}
		seen[k] = eb
		canon[eb] = eb
	}
	// Lay the blocks out again, as before.
	var post []*eblock
	done := map[*eblock]bool{}
	var visit func(eb *eblock)
	visit = func(eb *eblock) {
		if done[eb] {
			return
		}
		done[eb] = true
		if !eb.ret {
			visit(eb.jf)
			visit(eb.jt)
		}
		post = append(post, eb)
	}
	visit(canon[e.order[0]])
	e.order = e.order[:0]
	for i := len(post) - 1; i >= 0; i-- {
		e.order = append(e.order, post[i])
	}
}

// code writes each block's instructions, in order, knowing what its
// predecessors leave in A and X.
func (e *emitter) code() {
	meet := func(to *eblock, a, x *val) {
		if !to.inKnown {
			to.inA, to.inX, to.inKnown = a, x, true
			return
		}
		if to.inA != a {
			to.inA = nil
		}
		if to.inX != x {
			to.inX = nil
		}
	}
	for i, eb := range e.order {
		if eb.ret {
			continue
		}
		g := &gen{a: eb.inA, x: eb.inX}
		if i == 0 {
			g.a, g.x = nil, nil
			for _, v := range e.pre {
				g.loadA(v)
			}
		}
		t := eb.t
		if t.op&srcX != 0 {
			g.pair(t.a, t.x)
		} else {
			g.loadA(t.a)
		}
		if g.err != nil {
			e.err = g.err
			return
		}
		eb.ins, eb.outA, eb.outX = g.ins, g.a, g.x
		meet(eb.jt, eb.outA, eb.outX)
		meet(eb.jf, eb.outA, eb.outX)
	}
}

// layout places the blocks, adds the far-branch jumps an 8-bit offset
// cannot reach, and writes the program.
func (e *emitter) layout() ([]bpf.RawInstruction, error) {
	for {
		pos := 0
		for _, eb := range e.order {
			eb.pos = pos
			if eb.ret {
				pos++
				continue
			}
			pos += len(eb.ins) + 1
			if eb.farT {
				pos++
			}
			if eb.farF {
				pos++
			}
		}
		if pos > MaxInstructions {
			return nil, exprErrorf("the program would have %d instructions, more than the kernel's %d", pos, MaxInstructions)
		}
		changed := false
		for _, eb := range e.order {
			if eb.ret {
				continue
			}
			jmp := eb.pos + len(eb.ins)
			if !eb.farT && eb.jt.pos-(jmp+1) > 255 {
				eb.farT, changed = true, true
			}
			if !eb.farF && eb.jf.pos-(jmp+1) > 255 {
				eb.farF, changed = true, true
			}
		}
		if !changed {
			break
		}
	}
	var out []bpf.RawInstruction
	for _, eb := range e.order {
		if eb.ret {
			out = append(out, bpf.RawInstruction{Op: clsRET | srcK, K: eb.k})
			continue
		}
		out = append(out, eb.ins...)
		jmp := len(out)
		t := eb.t
		ins := bpf.RawInstruction{Op: t.op, K: t.k}
		next := jmp + 1
		var tramps []bpf.RawInstruction
		far := func(to *eblock) uint8 {
			off := next + len(tramps) - (jmp + 1)
			if to.ret {
				tramps = append(tramps, bpf.RawInstruction{Op: clsRET | srcK, K: to.k})
			} else {
				tramps = append(tramps, bpf.RawInstruction{Op: clsJMP | jmpJA})
			}
			return uint8(off)
		}
		var jtFar, jfFar *eblock
		if eb.farT {
			ins.Jt = far(eb.jt)
			jtFar = eb.jt
		} else {
			ins.Jt = uint8(eb.jt.pos - next)
		}
		if eb.farF {
			ins.Jf = far(eb.jf)
			jfFar = eb.jf
		} else {
			ins.Jf = uint8(eb.jf.pos - next)
		}
		out = append(out, ins)
		for i, tr := range tramps {
			to := jtFar
			if i == 1 || jtFar == nil {
				to = jfFar
			}
			if tr.Op == clsJMP|jmpJA {
				tr.K = uint32(to.pos - (len(out) + 1))
			}
			out = append(out, tr)
		}
	}
	return out, nil
}

// gen writes the instructions that compute values into A and X.
type gen struct {
	ins   []bpf.RawInstruction
	a, x  *val
	depth uint32
	err   error
}

func (g *gen) op(op uint16, k uint32) {
	g.ins = append(g.ins, bpf.RawInstruction{Op: op, K: k})
}

// loadA computes v into A.
func (g *gen) loadA(v *val) {
	if g.a == v || g.err != nil {
		return
	}
	switch {
	case v.op&0x07 == clsLD && v.op&0xe0 == modeIND:
		g.loadX(v.a)
		g.op(v.op, v.k)
	case v.op == clsLDX|modeMSH|szB:
		g.loadX(v)
		g.op(clsMISC|miscTXA, 0)
	case v.op&0x07 == clsLD:
		g.op(v.op, v.k)
	case v.op == clsALU|aluNEG:
		g.loadA(v.a)
		g.op(v.op, 0)
	case v.op&0x07 == clsALU && v.op&srcX != 0:
		g.pair(v.a, v.b)
		g.op(v.op, 0)
	case v.op&0x07 == clsALU:
		g.loadA(v.a)
		g.op(v.op, v.k)
	default:
		g.err = fmt.Errorf("bpfc: cannot compute %#x", v.op)
	}
	g.a = v
}

// loadX computes v into X.
func (g *gen) loadX(v *val) {
	if g.x == v || g.err != nil {
		return
	}
	switch {
	case v.isConst():
		g.op(clsLDX|modeIMM, v.k)
	case v.op == clsLDX|modeMSH|szB:
		g.op(v.op, v.k)
	default:
		g.loadA(v)
		g.op(clsMISC|miscTAX, 0)
	}
	g.x = v
}

// direct says whether v loads into X without touching A.
func direct(v *val) bool {
	return v.isConst() || v.op == clsLDX|modeMSH|szB
}

// clobbersX says whether computing v into A may change X.
func clobbersX(v *val) bool {
	switch {
	case v.op&0x07 == clsLD && v.op&0xe0 == modeIND, v.op == clsLDX|modeMSH|szB:
		return true
	case v.op&0x07 == clsALU && v.op&srcX != 0:
		return true
	case v.op&0x07 == clsALU:
		return clobbersX(v.a)
	}
	return false
}

// pair computes a into A and b into X.
func (g *gen) pair(a, b *val) {
	switch {
	case g.a == a && g.x == b:
	case direct(b):
		g.loadA(a)
		g.loadX(b)
	case !clobbersX(a):
		g.loadX(b)
		g.loadA(a)
	default:
		if g.depth >= 16 {
			g.err = exprErrorf("too many registers needed to evaluate expression")
			return
		}
		g.loadA(b)
		m := g.depth
		g.op(clsST, m)
		g.depth++
		g.loadA(a)
		g.depth--
		g.op(clsLDX|modeMEM, m)
		g.x = b
	}
}
