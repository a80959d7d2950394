package gopacketsrc

import (
	"fmt"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// checkLinkType reports whether the adapter can turn packets of link type
// lt into the Ethernet frames the dispatcher reads: those pcapfile can.
func checkLinkType(lt pcapfile.LinkType) error {
	if !lt.Supported() {
		return fmt.Errorf("gopacketsrc: link type %s (%d) is not supported: %w", lt, uint32(lt), pcapfile.ErrLinkType)
	}
	return nil
}

// toEthernet makes f the Ethernet frame of its packet, which region holds
// after s.headroom free bytes, with pcapfile's rewrite, and adjusts f's
// length and interface index to the link-layer header it replaced.
func (s *Source) toEthernet(f *steer.Frame, region []byte) {
	frame, delta, ifIndex, runt := s.link.ToEthernet(region)
	f.Data = frame
	if runt {
		s.stats.runts.Add(1) // WireLen stays the packet's: the dispatcher counts it too short
		return
	}
	f.WireLen = max(f.WireLen+delta, len(frame))
	if ifIndex > 0 && s.cfg.ifIndex == 0 {
		f.IfIndex = ifIndex
	}
}
