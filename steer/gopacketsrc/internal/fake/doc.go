// Package fake holds, in packages whose paths end as gopacket's do, types
// of the names and shapes that gopacketsrc recognises in gopacket/pcap,
// gopacket/pfring and gopacket/afpacket, so that its tests cover that
// recognition without cgo. Nothing else may use them.
package fake
