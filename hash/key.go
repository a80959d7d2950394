package hash

import (
	"crypto/rand"
	"fmt"
)

// Key lengths accepted by [NewToeplitz].
const (
	MinKeyLen     = 8  // shortest key: hashes inputs of up to 4 bytes
	MaxKeyLen     = 64 // longest key: hashes inputs of up to 60 bytes
	DefaultKeyLen = 40 // length of the Microsoft key and FreeBSD's RSS_KEYSIZE
)

// MicrosoftKey is the 40-byte key from Microsoft's RSS verification suite.
// It is FreeBSD's rss_key (sys/net/rss_config.c), which FreeBSD's drivers
// program under options RSS (rss_getkey; without it em, igb and ix program
// random bits), and the default of a few NICs' drivers (Linux's hns3 and
// Hyper-V netvsc, in 6.18). Most Linux drivers program a random key drawn
// once per boot (netdev_rss_key_fill, net/ethtool/ioctl.c in 6.18). Use it
// for reproducible output and teaching; it is public, so it does not resist
// aiming.
var MicrosoftKey = [DefaultKeyLen]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2,
	0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4,
	0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// SymmetricKey is the 40-byte key made of the 16-bit pattern 0x6d5a
// repeated. With it, A->B and B->A hash alike for both IPv4 and IPv6, on a
// NIC or here. The price: the key has 16 bits of entropy, every hash has
// equal upper and lower 16 bits, and anyone can aim flows at one worker.
// Prefer canonical order ([Canonical]) with a random key.
var SymmetricKey = func() (k [DefaultKeyLen]byte) {
	for i := 0; i < len(k); i += 2 {
		k[i], k[i+1] = 0x6d, 0x5a
	}
	return k
}()

// RandomKey returns a key of n bytes (MinKeyLen..MaxKeyLen) from crypto/rand.
func RandomKey(n int) ([]byte, error) {
	if n < MinKeyLen || n > MaxKeyLen {
		return nil, fmt.Errorf("hash: key length %d: %w", n, ErrKeyLength)
	}
	k := make([]byte, n)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("hash: random key: %w", err)
	}
	return k, nil
}
