package pcapfile

// pppLinkCases are TestLinkTypes' cases for LINKTYPE_PPP (9) and
// LINKTYPE_PPP_HDLC (50): the Ethernet header replaces the PPP header,
// its EtherType told by the PPP protocol.
func pppLinkCases() []linkCase {
	lcp := []byte{1, 1, 0, 4}
	return []linkCase{
		{name: "ppp-hdlc-framing-ipv4", link: 9, rec: cat([]byte{0xff, 0x03, 0x00, 0x21}, ip4), want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 10},
		{name: "ppp-no-framing-ipv6", link: 9, rec: cat([]byte{0x00, 0x57}, ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 12},
		{name: "ppp-compressed-protocol", link: 9, rec: cat([]byte{0x21}, ip4), want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 13},
		{name: "ppp-mpls", link: 9, rec: cat([]byte{0x02, 0x81}, ip4), want: eth(zeroMAC, zeroMAC, 0x8847, ip4), delta: 12},
		{name: "ppp-lcp", link: 9, rec: cat([]byte{0xff, 0x03, 0xc0, 0x21}, lcp), want: eth(zeroMAC, zeroMAC, 0x880b, lcp), delta: 10},
		{name: "ppp-runt", link: 9, rec: []byte{0xff, 0x03, 0x00}, want: []byte{}, runt: true},
		{name: "ppp-empty", link: 9, rec: []byte{}, want: []byte{}, runt: true},
		{name: "ppp-hdlc-ipv6", link: 50, rec: cat([]byte{0xff, 0x03, 0x00, 0x57}, ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 10},
		{name: "ppp-hdlc-cisco-ipv4", link: 50, rec: cat([]byte{0x0f, 0x00, 0x08, 0x00}, ip4), want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 10},
		{name: "ppp-hdlc-cisco-multicast-ipv6", link: 50, rec: cat([]byte{0x8f, 0x00, 0x86, 0xdd}, ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 10},
		{name: "ppp-hdlc-cisco-runt", link: 50, rec: []byte{0x0f, 0x00, 0x08}, want: []byte{}, runt: true},
	}
}
