package gopacketsrc

import (
	"fmt"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// checkLinkType reports whether the adapter can turn packets of link type
// lt into the Ethernet frames the dispatcher reads.
//
// pcapfile rewrites the other link types it reads (Linux cooked capture,
// raw IP, BSD loopback) into Ethernet in place, but keeps that code
// unexported; until it exports it, this adapter takes Ethernet only rather
// than keep a second copy of the rewrite.
func checkLinkType(lt pcapfile.LinkType) error {
	if lt == pcapfile.LinkTypeEthernet {
		return nil
	}
	if lt.Supported() {
		return fmt.Errorf("gopacketsrc: link type %s (%d) is not supported yet (only ETHERNET): %w",
			lt, uint32(lt), pcapfile.ErrLinkType)
	}
	return fmt.Errorf("gopacketsrc: link type %s (%d) is not supported: %w", lt, uint32(lt), pcapfile.ErrLinkType)
}

// linkHeadroom is how many bytes the arena leaves free before a packet of
// link type lt, for the Ethernet header toEthernet may put in front of it.
func linkHeadroom(pcapfile.LinkType) int { return 0 }

// toEthernet makes f the Ethernet frame of its packet, which region holds
// after s.headroom free bytes, and adjusts f's length and interface index
// to the link-layer header it replaced. An ETHERNET packet is its frame.
func (s *Source) toEthernet(f *steer.Frame, region []byte) {
	f.Data = region[s.headroom:]
}
