// Package afpacket has a type named and shaped as gopacket/afpacket's
// AncillaryVLAN.
package afpacket

// AncillaryVLAN carries a VLAN id out of band, as gopacket/afpacket's does.
type AncillaryVLAN struct {
	VLAN int
}
