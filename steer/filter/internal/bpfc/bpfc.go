package bpfc

import "golang.org/x/net/bpf"

// Options select the program Compile writes.
type Options struct {
	// Live writes the program libpcap attaches to a live Linux socket,
	// where the kernel has taken the outermost VLAN tag out of the frame:
	// the first vlan also matches a tag in the socket buffer's metadata
	// (SKF_AD_VLAN_TAG_PRESENT). Otherwise the program reads tags in the
	// frame's bytes, as for a capture file.
	Live bool
	// Snaplen is what the program returns for a frame it accepts.
	// Zero means 262144, tcpdump's default.
	Snaplen uint32
}

// Compile compiles expr, in pcap-filter(7) syntax, to the classic BPF
// program libpcap 1.10 compiles it to for Ethernet (DLT_EN10MB), or one
// that has the same outcome on every frame. An expression libpcap rejects
// is an *Error; one using a construct this compiler does not cover, an
// error wrapping ErrUnsupported.
func Compile(expr string, opts Options) ([]bpf.RawInstruction, error) {
	snaplen := opts.Snaplen
	if snaplen == 0 {
		snaplen = defaultSnaplen
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, vs: vals{}, live: opts.Live}
	p.off = offsets{linktype: 12, linkpl: 14, nl: 0, nlNosnap: 3}
	c, err := p.parse()
	if err != nil {
		return nil, err
	}
	accept := &block{ret: true, k: snaplen}
	if c == nil {
		return []bpf.RawInstruction{{Op: clsRET | srcK, K: snaplen}}, nil
	}
	reject := &block{ret: true}
	bd := &builder{vs: p.vs, subst: map[[2]*val]*val{}}
	var v0 *val
	if p.off.variable {
		v0 = p.vs.konst(0)
	}
	root := bd.build(c, v0, &cont{b: accept}, &cont{b: reject})
	if bd.blocks > maxBlocks {
		return nil, exprErrorf("expression too complex: more than %d tests", maxBlocks)
	}
	o := newOptimizer(root)
	o.phase1()
	if err := o.phase2(&folder{vs: p.vs, memo: map[*val]*val{}}); err != nil {
		return nil, err
	}
	return emit(o.root)
}
