//go:build linux

package netns

import (
	"context"
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// TestLinkState: the promiscuity count follows ip link set promisc, and an
// XDP program attached through a BPF link (generic mode) shows while the
// link lives and is gone after.
func TestLinkState(t *testing.T) {
	p := New(t, Options{})
	ctx := context.Background()
	state := func() LinkState {
		t.Helper()
		st, err := p.A.LinkState(ctx, p.A.Link)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := state(); st.Promiscuity != 0 || st.XDP {
		t.Fatalf("a fresh link: %+v", st)
	}
	if out, err := p.A.Exec(ctx, "ip", "link", "set", "dev", p.A.Link, "promisc", "on"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if st := state(); st.Promiscuity != 1 {
		t.Errorf("promisc on: %+v, want promiscuity 1", st)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.XDP,
		License:      "BSD",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}, // XDP_PASS
	})
	if err != nil {
		t.Fatalf("loading an XDP program: %v", err)
	}
	defer prog.Close()
	var l link.Link
	err = p.A.Do(func() error {
		ifi, err := net.InterfaceByName(p.A.Link)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifi.Index, Flags: link.XDPGenericMode})
		return err
	})
	if err != nil {
		t.Fatalf("attaching: %v", err)
	}
	if st := state(); !st.XDP {
		t.Errorf("with a program attached: %+v", st)
	}
	l.Close()
	if st := state(); st.XDP {
		t.Errorf("after the link closed: %+v", st)
	}
	if _, err := p.A.LinkState(ctx, "nosuchlink"); err == nil {
		t.Error("a missing link gave no error")
	}
}
