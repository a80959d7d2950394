package bpfc

// folder computes values as libpcap's second optimizer loop leaves them:
// constants folded (x*0 and x&0 are 0, and so is 0/x), a load at a
// constant index made absolute, operations with a constant operand in
// their immediate form. A value that folds to a constant needs no load:
// the program never reads the packet for it.
type folder struct {
	vs   vals
	memo map[*val]*val
}

func (f *folder) fold(v *val) (*val, error) {
	if v == nil {
		return nil, nil
	}
	if r, ok := f.memo[v]; ok {
		return r, nil
	}
	r, err := f.fold1(v)
	if err != nil {
		return nil, err
	}
	f.memo[v] = r
	return r, nil
}

func (f *folder) fold1(v *val) (*val, error) {
	vs := f.vs
	switch {
	case v.op&0x07 == clsLD && v.op&0xe0 == modeIND:
		x, err := f.fold(v.a)
		if err != nil {
			return nil, err
		}
		if x.isConst() {
			return vs.abs(v.op&0x18, v.k+x.k), nil
		}
		if x.op == clsALU|aluADD|srcX && x.a.isConst() {
			// ld #k; add x; tax; ld [x+off] is ld [x+off+k]
			return vs.ind(v.op&0x18, v.k+x.a.k, x.b), nil
		}
		return vs.ind(v.op&0x18, v.k, x), nil
	case v.op == clsALU|aluNEG:
		a, err := f.fold(v.a)
		if err != nil {
			return nil, err
		}
		if a.isConst() {
			return vs.konst(-a.k), nil
		}
		return vs.neg(a), nil
	case v.op&0x07 == clsALU && v.op&srcX != 0:
		a, err := f.fold(v.a)
		if err != nil {
			return nil, err
		}
		b, err := f.fold(v.b)
		if err != nil {
			return nil, err
		}
		op := v.op & 0xf0
		if b.isConst() {
			if a.isConst() {
				return foldOp(vs, op, a.k, b.k)
			}
			if (op == aluLSH || op == aluRSH) && b.k > 31 {
				return nil, exprErrorf("shift by more than 31 bits")
			}
			return f.aluK(op, a, b.k)
		}
		if a.isConst() && a.k == 0 {
			switch op {
			case aluADD, aluOR, aluXOR:
				return b, nil
			case aluMUL, aluDIV, aluMOD, aluAND, aluLSH, aluRSH:
				return vs.konst(0), nil
			}
		}
		return vs.aluX(op, a, b), nil
	case v.op&0x07 == clsALU:
		a, err := f.fold(v.a)
		if err != nil {
			return nil, err
		}
		return f.aluK(v.op&0xf0, a, v.k)
	}
	return v, nil
}

// aluK is a op k, folded.
func (f *folder) aluK(op uint16, a *val, k uint32) (*val, error) {
	if k == 0 {
		switch op {
		case aluADD, aluSUB, aluLSH, aluRSH, aluOR, aluXOR:
			return a, nil
		case aluMUL, aluAND:
			return f.vs.konst(0), nil
		case aluDIV:
			return nil, exprErrorf("division by zero")
		case aluMOD:
			return nil, exprErrorf("modulus by zero")
		}
	}
	if a.isConst() {
		return foldOp(f.vs, op, a.k, k)
	}
	return f.vs.aluK(op, a, k), nil
}

func foldOp(vs vals, op uint16, a, b uint32) (*val, error) {
	switch op {
	case aluADD:
		a += b
	case aluSUB:
		a -= b
	case aluMUL:
		a *= b
	case aluDIV:
		if b == 0 {
			return nil, exprErrorf("division by zero")
		}
		a /= b
	case aluMOD:
		if b == 0 {
			return nil, exprErrorf("modulus by zero")
		}
		a %= b
	case aluAND:
		a &= b
	case aluOR:
		a |= b
	case aluXOR:
		a ^= b
	case aluLSH:
		if b < 32 {
			a <<= b
		} else {
			a = 0
		}
	case aluRSH:
		if b < 32 {
			a >>= b
		} else {
			a = 0
		}
	}
	return vs.konst(a), nil
}

// phase2 folds the test of every block still reachable, as libpcap's
// second loop: a test whose outcome is now known goes one way without
// loading anything; "x & 0xffffffff == 0", which libpcap makes a jset
// #0xffffffff and takes as always set, still loads x.
func (o *optimizer) phase2(f *folder) error {
	o.mark++
	var walk func(b *block) error
	walk = func(b *block) error {
		if b.mark == o.mark || b.leaf() {
			return nil
		}
		b.mark = o.mark
		t := b.t
		a, err := f.fold(t.a)
		if err != nil {
			return err
		}
		t.a = a
		if t.op&srcX != 0 {
			x, err := f.fold(t.x)
			if err != nil {
				return err
			}
			t.x = x
			if x.isConst() {
				t.op &^= srcX
				t.k, t.x = x.k, nil
			}
		}
		t.a1 = nil
		b.t = t
		switch {
		case t.op == clsJMP|jmpJEQ|srcK && t.k == 0 && a.op == clsALU|aluAND|srcK && a.k == 0xffffffff,
			t.op == clsJMP|jmpJSET|srcK && t.k == 0:
			b.jt = b.jf
		case t.op&srcX == 0 && a.isConst():
			if evalJump(t.op, a.k, t.k) {
				b.jf = b.jt
			} else {
				b.jt = b.jf
			}
		}
		if err := walk(b.jt); err != nil {
			return err
		}
		return walk(b.jf)
	}
	return walk(o.root)
}
