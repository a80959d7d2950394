package steer_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// ExampleHashConfig_tunnels classifies a capture of tunnelled traffic
// twice: by the outer headers, as a NIC's RSS hashes it, its 78 TCP
// connections are a few flows (the shims' connections are their own, as
// MPLS and PPPoE are always walked); with TunnelsInner each connection is
// its own (a flowid per direction), and the key names what carried it.
func ExampleHashConfig_tunnels() {
	var frames [][]byte
	src, err := pcapfile.NewReader(sample.TunnelsReader())
	if err != nil {
		panic(err)
	}
	for {
		var b steer.Batch
		err := src.ReadBatch(context.Background(), &b)
		for _, f := range b.Frames {
			frames = append(frames, append([]byte(nil), f.Data...))
		}
		if b.Release != nil {
			b.Release()
		}
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			panic(err)
		}
	}

	var cls [2]*steer.Classifier
	for i, mode := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
		if cls[i], err = steer.NewClassifier(steer.HashConfig{Key: hash.MicrosoftKey[:], Tunnels: mode}); err != nil {
			panic(err)
		}
	}
	outer, inner := map[uint32]bool{}, map[uint32]bool{}
	encaps := map[string]int{}
	for _, f := range frames {
		var o, in steer.Classification
		cls[0].Classify(f, &o)
		cls[1].Classify(f, &in)
		if in.HashType != hash.RSSTCPIPv4 { // the odd frames
			continue
		}
		outer[o.FlowID], inner[in.FlowID] = true, true
		encaps[in.Key.Encapsulation()]++
	}
	fmt.Printf("the TCP connections' frames: %d flowids by the outer headers, %d by the inner\n", len(outer), len(inner))
	for _, e := range []string{"vxlan:5001", "gre+erspan2:5", "vxlan:5002+gre:key=7", "vxlan:5003+vlan:100", "mpls:2000+pw"} {
		fmt.Printf("%-21s %4d frames\n", e, encaps[e])
	}
	// Output:
	// the TCP connections' frames: 31 flowids by the outer headers, 156 by the inner
	// vxlan:5001             668 frames
	// gre+erspan2:5           28 frames
	// vxlan:5002+gre:key=7    34 frames
	// vxlan:5003+vlan:100     32 frames
	// mpls:2000+pw            28 frames
}
