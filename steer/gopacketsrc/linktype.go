package gopacketsrc

import (
	"fmt"

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
