package bpfc

import "math/bits"

// block is a basic block of the program: a test with its two successors,
// or a return (jt and jf nil).
type block struct {
	t      test
	ret    bool
	k      uint32 // a return's value
	jt, jf *block

	// swap: the first optimizer pass swaps jt and jf (see test.swap).
	swap bool

	// Optimizer state.
	id     int
	level  int
	link   *block // the next block of the same level
	mark   int
	dom    bitset
	et, ef edge
	in     []*edge
}

type edge struct {
	id    int
	pred  *block
	sense bool // the true branch
	edom  bitset
}

func (e *edge) succ() **block {
	if e.sense {
		return &e.pred.jt
	}
	return &e.pred.jf
}

func (b *block) leaf() bool { return b.jt == nil }

// builder turns a condition tree into blocks, as libpcap's backpatching
// does: the true exits of a in "a and b" lead to b, its false exits to
// the false exit of the whole.
type builder struct {
	vs     vals
	subst  map[[2]*val]*val
	blocks int
}

// maxBlocks bounds the tests a program is built of before optimizing,
// and so the optimizer's work (its sets are quadratic in it).
const maxBlocks = 4096

// cont is where a branch goes: a block, or one made on demand for the
// variable offset the branch arrives with (a live program's offsets
// differ by whether the first vlan's tag was in the frame).
type cont struct {
	b    *block
	f    func(v *val) *block
	memo map[*val]*block
}

func (c *cont) get(v *val) *block {
	if c.b != nil {
		return c.b
	}
	if b, ok := c.memo[v]; ok {
		return b
	}
	b := c.f(v)
	c.memo[v] = b
	return b
}

func (bd *builder) lazy(f func(v *val) *block) *cont {
	return &cont{f: f, memo: map[*val]*block{}}
}

// build returns the entry block of c, evaluated with the variable offset
// v, going to t when c holds and to f when not.
func (bd *builder) build(c *cond, v *val, t, f *cont) *block {
	switch c.kind {
	case cAnd:
		return bd.build(c.a, v, bd.lazy(func(v *val) *block { return bd.build(c.b, v, t, f) }), f)
	case cOr:
		return bd.build(c.a, v, t, bd.lazy(func(v *val) *block { return bd.build(c.b, v, t, f) }))
	case cNot:
		return bd.build(c.a, v, f, t)
	case cIf:
		return bd.build(c.a, v,
			bd.lazy(func(v *val) *block { return bd.build(c.b, v, t, f) }),
			bd.lazy(func(v *val) *block { return bd.build(c.c, v, t, f) }))
	case cAddV:
		return bd.build(c.a, bd.vs.aluK(aluADD, v, c.k), t, f)
	}
	if bd.blocks++; bd.blocks > maxBlocks {
		return t.get(v) // the count makes Compile fail
	}
	tt := c.t
	tt.a = bd.substitute(tt.a, v)
	tt.x = bd.substitute(tt.x, v)
	tt.a1 = bd.substitute(tt.a1, v)
	return &block{t: tt, jt: t.get(v), jf: f.get(v), swap: tt.swap}
}

// substitute replaces the variable offset in x by v.
func (bd *builder) substitute(x, v *val) *val {
	if x == nil || !x.hasVar {
		return x
	}
	if x.op == opVar {
		return v
	}
	key := [2]*val{x, v}
	if r, ok := bd.subst[key]; ok {
		return r
	}
	r := bd.vs.get(x.op, x.k, bd.substitute(x.a, v), bd.substitute(x.b, v))
	bd.subst[key] = r
	return r
}

type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }
func (s bitset) set(i int)   { s[i/64] |= 1 << (i % 64) }
func (s bitset) has(i int) bool {
	return s[i/64]&(1<<(i%64)) != 0
}
func (s bitset) fill() {
	for i := range s {
		s[i] = ^uint64(0)
	}
}
func (s bitset) clear() {
	for i := range s {
		s[i] = 0
	}
}
func (s bitset) intersect(o bitset) {
	for i := range s {
		s[i] &= o[i]
	}
}

// optimizer reproduces the branch optimizations of libpcap's optimizer
// (optimize.c), whose effects decide a program's outcome on frames too
// short for a load it would otherwise make: a test whose outcome is known
// from one that dominates it is skipped, a test both of whose branches
// lead to the same place is skipped, and a test of a value another test
// on the same path already loaded is pulled up before the tests between
// them. Values are numbered by their val pointer, as libpcap numbers
// them, so the same tests are found the same.
type optimizer struct {
	root   *block
	blocks []*block
	edges  []*edge
	levels []*block
	pass   int
	mark   int

	done, nonBranch bool
}

func newOptimizer(root *block) *optimizer {
	o := &optimizer{root: root}
	o.mark++
	o.number(root)
	n := len(o.blocks)
	o.edges = make([]*edge, 2*n)
	for i, b := range o.blocks {
		b.et = edge{id: i, pred: b, sense: true, edom: newBitset(2 * n)}
		b.ef = edge{id: n + i, pred: b, edom: newBitset(2 * n)}
		b.dom = newBitset(n)
		o.edges[i], o.edges[n+i] = &b.et, &b.ef
	}
	return o
}

// number numbers the blocks depth first, true branch first, as libpcap
// does once before optimizing.
func (o *optimizer) number(b *block) {
	if b == nil || b.mark == o.mark {
		return
	}
	b.mark = o.mark
	b.id = len(o.blocks)
	o.blocks = append(o.blocks, b)
	o.number(b.jt)
	o.number(b.jf)
}

// a returns the value in A when b branches, in the current pass.
func (o *optimizer) a(b *block) *val {
	if o.pass == 1 && b.t.a1 != nil {
		return b.t.a1
	}
	return b.t.a
}

// phase1 runs the branch optimizations to a fixed point, as libpcap's
// first optimizer loop.
func (o *optimizer) phase1() {
	loops := 0
	for o.pass = 1; ; o.pass++ {
		o.done, o.nonBranch = true, false
		o.findLevels()
		o.findDom()
		o.findEdom()
		for l := o.root.level; l >= 0; l-- {
			for b := o.levels[l]; b != nil; b = b.link {
				o.optBlock(b)
			}
		}
		for l := 1; l <= o.root.level; l++ {
			for b := o.levels[l]; b != nil; b = b.link {
				o.optJump(&b.et)
				o.optJump(&b.ef)
			}
		}
		o.findInEdges()
		for l := 1; l <= o.root.level; l++ {
			for b := o.levels[l]; b != nil; b = b.link {
				o.orPullup(b)
				o.andPullup(b)
			}
		}
		if o.done {
			return
		}
		if o.nonBranch {
			loops = 0
		} else if loops++; loops >= 100 {
			return
		}
	}
}

func (o *optimizer) findLevels() {
	o.levels = make([]*block, len(o.blocks)+1)
	o.mark++
	o.levelsR(o.root)
}

func (o *optimizer) levelsR(b *block) {
	if b.mark == o.mark {
		return
	}
	b.mark = o.mark
	b.link = nil
	if b.leaf() {
		b.level = 0
	} else {
		o.levelsR(b.jt)
		o.levelsR(b.jf)
		b.level = max(b.jt.level, b.jf.level) + 1
	}
	b.link = o.levels[b.level]
	o.levels[b.level] = b
}

func (o *optimizer) findDom() {
	for _, b := range o.blocks {
		b.dom.fill()
	}
	o.root.dom.clear()
	for l := o.root.level; l >= 0; l-- {
		for b := o.levels[l]; b != nil; b = b.link {
			b.dom.set(b.id)
			if b.leaf() {
				continue
			}
			b.jt.dom.intersect(b.dom)
			b.jf.dom.intersect(b.dom)
		}
	}
}

func (o *optimizer) findEdom() {
	for _, e := range o.edges {
		e.edom.fill()
	}
	o.root.et.edom.clear()
	o.root.ef.edom.clear()
	prop := func(e *edge) {
		e.edom.set(e.id)
		if s := *e.succ(); s != nil {
			s.et.edom.intersect(e.edom)
			s.ef.edom.intersect(e.edom)
		}
	}
	for l := o.root.level; l >= 0; l-- {
		for b := o.levels[l]; b != nil; b = b.link {
			prop(&b.et)
			prop(&b.ef)
		}
	}
}

func (o *optimizer) findInEdges() {
	for _, b := range o.blocks {
		b.in = b.in[:0]
	}
	for l := o.root.level; l > 0; l-- {
		for b := o.levels[l]; b != nil; b = b.link {
			b.jt.in = append(b.jt.in, &b.et)
			b.jf.in = append(b.jf.in, &b.ef)
		}
	}
}

// optBlock applies what libpcap's peephole pass changes in a block's
// branches: the first pass swaps the branches of a jset made from a
// masked comparison with zero; a test whose outcome is known goes the
// same way on both branches.
func (o *optimizer) optBlock(b *block) {
	if b.leaf() {
		return
	}
	if b.swap {
		b.jt, b.jf = b.jf, b.jt
		b.swap = false
	}
	if o.pass == 1 && b.t.a1 != nil {
		// libpcap's first pass changes the block's code (the
		// subtraction or the and goes), so it runs another.
		o.done, o.nonBranch = false, true
	}
	if taken, ok := phase1Outcome(b.t, o.a(b)); ok {
		if b.jt != b.jf {
			o.done, o.nonBranch = false, true
		}
		if taken {
			b.jf = b.jt
		} else {
			b.jt = b.jf
		}
	}
}

// phase1Outcome is the outcome of t when the first optimizer loop knows
// it: a jset #0, or a constant compared with a constant.
func phase1Outcome(t test, a *val) (taken, ok bool) {
	if t.op == clsJMP|jmpJSET|srcK && t.k == 0 {
		return false, true
	}
	if t.op&srcX != 0 || !a.isConst() {
		return false, false
	}
	return evalJump(t.op, a.k, t.k), true
}

func evalJump(op uint16, a, k uint32) bool {
	switch op & 0xf0 {
	case jmpJEQ:
		return a == k
	case jmpJGT:
		return a > k
	case jmpJGE:
		return a >= k
	}
	return a&k != 0
}

// optJump moves the edge e past blocks whose outcome is known on it.
func (o *optimizer) optJump(e *edge) {
	succ := e.succ()
	if (*succ).leaf() {
		return
	}
	if (*succ).jt == (*succ).jf {
		*succ = (*succ).jt
		o.done, o.nonBranch = false, true
	}
top:
	for i, w := range e.edom {
		for w != 0 {
			bit := bits.TrailingZeros64(w)
			w &^= 1 << bit
			if target := o.fold(*succ, o.edges[64*i+bit]); target != nil {
				*succ = target
				o.done = false
				if !target.leaf() {
					goto top
				}
				return
			}
		}
	}
}

// fold returns the successor child takes when the branch e was taken, if
// e tells: the same test, or an equality with another constant.
func (o *optimizer) fold(child *block, e *edge) *block {
	pred := e.pred
	if child.leaf() || pred.leaf() || child.t.op != pred.t.op || o.a(child) != o.a(pred) {
		return nil
	}
	same := child.t.k == pred.t.k
	if child.t.op&srcX != 0 {
		same = child.t.x == pred.t.x
	}
	if same {
		if e.sense {
			return child.jt
		}
		return child.jf
	}
	if e.sense && child.t.op == clsJMP|jmpJEQ|srcK {
		return child.jf
	}
	return nil
}

// orPullup and andPullup move a test of the value the blocks before b
// tested up a chain of ors (ands) to right after them, above tests of
// other values, as libpcap's or_pullup and and_pullup.
func (o *optimizer) orPullup(b *block)  { o.pullup(b, true) }
func (o *optimizer) andPullup(b *block) { o.pullup(b, false) }

func (o *optimizer) pullup(b *block, isOr bool) {
	if len(b.in) == 0 {
		return
	}
	// same returns the branch along the chain, other the branch all the
	// chain's blocks share.
	same := func(x *block) **block {
		if isOr {
			return &x.jf
		}
		return &x.jt
	}
	other := func(x *block) *block {
		if isOr {
			return x.jt
		}
		return x.jf
	}
	first := b.in[len(b.in)-1]
	v := o.predA(first.pred)
	for _, e := range b.in {
		if o.predA(e.pred) != v {
			return
		}
	}
	var diffp **block
	if first.pred.jt == b {
		diffp = &first.pred.jt
	} else {
		diffp = &first.pred.jf
	}
	atTop := true
	for {
		d := *diffp
		if d == nil || other(d) != other(b) || !d.dom.has(b.id) {
			return
		}
		if o.predA(d) != v {
			break
		}
		diffp = same(d)
		atTop = false
	}
	samep := same(*diffp)
	for {
		s := *samep
		if s == nil || other(s) != other(b) || !s.dom.has(b.id) {
			return
		}
		if o.predA(s) == v {
			break
		}
		samep = same(s)
	}
	pull := *samep
	*samep = *same(pull)
	*same(pull) = *diffp
	if atTop {
		for _, e := range b.in {
			if e.pred.jt == b {
				e.pred.jt = pull
			} else {
				e.pred.jf = pull
			}
		}
	} else {
		*diffp = pull
	}
	o.done = false
}

// predA is the value in A when x ends (none for a return).
func (o *optimizer) predA(x *block) *val {
	if x.leaf() {
		return nil
	}
	return o.a(x)
}
