// Package pfring has a type named and shaped as gopacket/pfring's NextResult.
package pfring

import "strconv"

// NextResult is an int32 result code, as gopacket/pfring's is.
type NextResult int32

// Error implements error.
func (r NextResult) Error() string { return "pfring next result " + strconv.Itoa(int(r)) }

// The values gopacketsrc tells apart: gopacket/pfring's "no packet" is 0.
const (
	NextNoPacketNonblocking NextResult = 0
	NextError               NextResult = -1
)
