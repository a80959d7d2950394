package sample_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/sample"
	sg "github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

func TestTunnelsEmbeddedIsGenerated(t *testing.T) {
	b := generate(t, sg.SampleTunnels)
	if !bytes.Equal(b, sample.Tunnels) {
		t.Fatalf("the embedded %s (%d bytes) differs from the generator's output (%d bytes): run go generate ./internal/sample",
			sample.TunnelsName, len(sample.Tunnels), len(b))
	}
	if sample.TunnelsReader().Len() != len(sample.Tunnels) {
		t.Error("TunnelsReader is not the capture")
	}
}

// TestTunnels classifies the tunnels capture. With tunnels opened, every
// frame of a tunnelled connection is keyed by its inner connection, under
// the encapsulations the generator put it in, and the odd frames get their
// reasons; by the outer headers the connections are a handful of flows,
// by the inner ones each its own. Where gopacket decodes a frame, its
// innermost IPv4 and TCP headers are our key's.
func TestTunnels(t *testing.T) {
	clients := netip.MustParsePrefix("172.16.0.0/14")
	servers := netip.MustParsePrefix("203.0.113.0/24")
	var cls [2]*steer.Classifier
	for i, m := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
		c, err := steer.NewClassifier(steer.HashConfig{Key: hash.MicrosoftKey[:], Tunnels: m})
		if err != nil {
			t.Fatal(err)
		}
		cls[i] = c
	}
	type connKey struct {
		encap string
		a, b  netip.AddrPort
	}
	conns := map[connKey]bool{}
	reasons := map[steer.Reason]int{}
	fragments := 0
	flows := [2]map[uint32]bool{{}, {}}
	for i, r := range parse(t, sample.Tunnels) {
		var out, in steer.Classification
		cls[0].Classify(r.data, &out)
		cls[1].Classify(r.data, &in)
		k := in.Key
		if k.Fragment {
			fragments++
			continue
		}
		if in.Reason != steer.ReasonOK {
			reasons[in.Reason]++
			continue
		}
		if !(clients.Contains(k.Src) && servers.Contains(k.Dst)) && !(servers.Contains(k.Src) && clients.Contains(k.Dst)) || k.Proto != 6 {
			t.Errorf("frame %d: %+v is no tunnelled connection's", i, k)
			continue
		}
		a, b := netip.AddrPortFrom(k.Src, k.SrcPort), netip.AddrPortFrom(k.Dst, k.DstPort)
		if servers.Contains(k.Src) {
			a, b = b, a
		}
		conns[connKey{k.Encapsulation(), a, b}] = true
		flows[0][out.FlowID] = true
		flows[1][in.FlowID] = true
		shim := k.Depth == 0
		if shim != (out.Key == in.Key) {
			t.Errorf("frame %d (%s): tunnels outer give %+v", i, k.Encapsulation(), out.Key)
		}
		if k.Encaps[0].Kind == steer.EncapPseudowire || k.Encaps[k.NEncap-1].Kind == steer.EncapPseudowire ||
			k.NEncap > 1 && k.Encaps[1].Kind == steer.EncapPseudowire {
			continue // gopacket has no pseudowire decoder
		}
		p := gopacket.NewPacket(r.data, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
		var ip *layers.IPv4
		for _, l := range p.Layers() {
			if l, ok := l.(*layers.IPv4); ok {
				ip = l
			}
		}
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if p.ErrorLayer() != nil || ip == nil || tcp == nil || netip.AddrFrom4([4]byte(ip.SrcIP)) != k.Src ||
			netip.AddrFrom4([4]byte(ip.DstIP)) != k.Dst || uint16(tcp.SrcPort) != k.SrcPort || uint16(tcp.DstPort) != k.DstPort {
			t.Errorf("frame %d (%s): gopacket decodes %v", i, k.Encapsulation(), p)
		}
	}
	byEncap := map[string]int{}
	for c := range conns {
		byEncap[c.encap]++
	}
	want := map[string]int{
		"vxlan:5001": sg.VXLANConnections, "geneve:77": sg.GENEVEConnections, "gre:key=9": sg.GREConnections,
		"gre+erspan2:5": sg.ERSPANConnections, "ipip": sg.IPIPConnections, "mpls:1600": sg.MPLSConnections,
		"vxlan:5002+gre:key=7": sg.NestedConnections, "vxlan:5003+vlan:100": sg.InnerVLANConns, "mpls:2000+pw": sg.PseudowireConns,
	}
	gtpu, pppoe := 0, 0
	for e, n := range byEncap {
		switch {
		case len(e) > 5 && e[:5] == "gtpu:":
			gtpu += n
		case len(e) > 6 && e[:6] == "pppoe:":
			pppoe += n
		case want[e] != n:
			t.Errorf("%d connections in %s, want %d", n, e, want[e])
		}
	}
	// GTP-U has a TEID per user and direction, PPPoE a session per client.
	if gtpu != 2*sg.GTPUConnections || pppoe != sg.PPPoEConnections {
		t.Errorf("%d GTP-U connection-TEIDs (want %d), %d PPPoE connections (want %d)", gtpu, 2*sg.GTPUConnections, pppoe, sg.PPPoEConnections)
	}
	n := sg.TunnelOddities
	wantReasons := map[steer.Reason]int{steer.ReasonTunnelNonIP: 2 * n, steer.ReasonBadVXLAN: n, steer.ReasonNonIP: n, steer.ReasonPPPNonIP: n}
	for r, c := range wantReasons {
		if reasons[r] != c {
			t.Errorf("%d frames with reason %v, want %d", reasons[r], r, c)
		}
	}
	if len(reasons) != len(wantReasons) || fragments != 2*n {
		t.Errorf("reasons %v, %d fragments; want %v and %d", reasons, fragments, wantReasons, 2*n)
	}
	total := sg.VXLANConnections + sg.GENEVEConnections + sg.GREConnections + sg.ERSPANConnections + sg.GTPUConnections +
		sg.IPIPConnections + sg.MPLSConnections + sg.PPPoEConnections + sg.NestedConnections + sg.InnerVLANConns + sg.PseudowireConns
	// A flowid per direction (the hash is not symmetric): every
	// connection's by the inner headers; by the outer ones, the shims'
	// connections' and one or two per tunnel's endpoints.
	shims := sg.MPLSConnections + sg.PPPoEConnections + sg.PseudowireConns
	if len(flows[1]) != 2*total || len(flows[0]) > 2*shims+16 {
		t.Errorf("%d flowids by the inner headers (want %d), %d by the outer (want at most %d)", len(flows[1]), 2*total, len(flows[0]), 2*shims+16)
	}
	t.Logf("%d connections: %d flowids by the outer headers, %d by the inner", total, len(flows[0]), len(flows[1]))
}
