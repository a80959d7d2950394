// Package pcap has a type named and shaped as gopacket/pcap's NextError.
package pcap

import "strconv"

// NextError is an int32 error code, as gopacket/pcap's is.
type NextError int32

// Error implements error.
func (e NextError) Error() string { return "pcap next error " + strconv.Itoa(int(e)) }

// The values gopacketsrc tells apart: gopacket/pcap's timeout is 0.
const (
	NextErrorTimeoutExpired NextError = 0
	NextErrorReadError      NextError = -1
)
