package hash_test

import (
	"fmt"
	"net/netip"

	"github.com/rpsgo/rps/hash"
)

// Hash a TCP/IPv4 connection as RSS does, with the Microsoft key: the first
// row of Microsoft's verification table.
func Example() {
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		panic(err)
	}
	src := netip.MustParseAddr("66.9.149.187")
	dst := netip.MustParseAddr("161.142.100.80")

	t2 := hash.NewTuple2(src, dst)
	t4 := hash.NewTuple4(src, dst, 2794, 1766)
	fmt.Printf("%s %#08x\n", hash.RSSIPv4, h.SumTuple(&t2))
	fmt.Printf("%s %#08x\n", hash.RSSTCPIPv4, h.SumTuple(&t4))
	fmt.Printf("input % x\n", t4.Bytes())
	// Output:
	// RSS_IPV4 0x323e8fc2
	// RSS_TCP_IPV4 0x51ccc178
	// input 42 09 95 bb a1 8e 64 50 0a ea 06 e6
}
