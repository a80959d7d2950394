// Package hash computes the Toeplitz hash that receive-side scaling (RSS)
// uses to give every flow a 32-bit flowid, and SipHash, the keyed
// alternative.
//
// A NIC with several receive queues hashes each frame's addresses and ports
// with a secret key and picks a queue from the result. A FreeBSD kernel
// built with options RSS does the same in software when the NIC's hash is
// missing or of a type the configuration does not trust
// (rss_mbuf_software_hash_v4 and _v6 in sys/netinet/in_rss.c and
// sys/netinet6/in6_rss.c, through rss_hash_ip4_4tuple and friends; rss_hash
// in sys/net/rss_config.c calls toeplitz_hash of sys/net/toeplitz.c with the
// key), wherever it needs the hash: when netisr selects a CPU for an IP
// packet with more than one netisr thread, and after reassembly. It records
// the result in m->m_pkthdr.flowid with an M_HASHTYPE_* value saying what
// was hashed. A GENERIC kernel (no options RSS) computes no such hash on
// receive and steers by the NIC's flowid as it comes. This package is that
// layer:
//
//   - [Toeplitz] hashes a byte string with a key of 8 to 64 bytes, using
//     tables precomputed per key, so [Toeplitz.Sum] allocates nothing and is
//     safe for concurrent use. On amd64 CPUs with GFNI and AVX-512 (BW,
//     VBMI) Sum runs Galois-field affine instructions instead of table
//     lookups, the method of DPDK's rte_thash_gfni; the choice is made once
//     per hasher from CPUID ([Toeplitz.Accelerated] tells which). Both give
//     the same result. [Toeplitz.SumTuples] hashes a batch in one call, and
//     [Toeplitz.SumIPv4Tuples] a batch of 12-byte inputs (IPv4 4-tuples, or
//     2-tuples with zero ports) 16 at a time: with GFNI, spread over
//     registers by input byte, about 1 ns a tuple.
//   - [Tuple] builds the exact byte strings FreeBSD feeds the hash: source
//     address, destination address, source port, destination port, in
//     network byte order (12 or 8 bytes for IPv4, 36 or 32 for IPv6).
//   - [HashType] names what a flowid was computed from, with FreeBSD's
//     M_HASHTYPE_* names and values; [Types] is a set of RSS hash types,
//     which tuples a configuration allows (rss_gethashconfig's mask).
//   - [SipHash] is SipHash-2-4 with a 128-bit key, the function Linux's
//     flow hash uses; [Algorithm] names the two functions for a
//     configuration, as FreeBSD's loader tunable net.inet.rss.hashalgo
//     chooses between Toeplitz (its default) and a naive byte sum.
//
// # Keys
//
// The library's default is a fresh random key per instance ([RandomKey]), as
// Linux keys its flow hash with random bytes drawn once per boot, on first
// use (net_get_random_once): whoever knows the key can choose
// addresses and ports that all land on one worker. [MicrosoftKey], the key
// FreeBSD ships as its default rss_key and the one in Microsoft's
// verification suite, gives reproducible output for tests and teaching.
//
// A Toeplitz hash is linear in its key too: a flowid bit is a fixed bit
// XOR, for each input bit in which flows differ, that bit ANDed with a key
// bit. With a random key, flows that differ in d independent input bits
// get the same low bit under 1 key in 2^d, and then all land on one of two
// workers when the buckets alternate between them (FreeBSD's default
// indirection table): UDP clients of one /24 hashed by their addresses
// only (UDP's default) differ in the last byte, and share a worker under
// 1 key in 256. Hashing their ports too ([TypeUDPIPv4] and [TypeUDPIPv6]
// in [Types]) adds the ports' varying bits and makes that far rarer; a
// fixed key that spreads the traffic avoids it ([MicrosoftKey] splits
// those clients 128 to 128).
//
// # Toeplitz or SipHash
//
// A Toeplitz hash is linear over GF(2): the hash of a XOR b is the XOR of
// their hashes. Whoever sees that three inputs land in one bucket (by
// timing a worker, say) knows their XOR lands there too, whatever the key,
// and can make many more colliding flows without learning the key. SipHash
// has no such structure. Toeplitz stays the default because its flowid is
// the one a NIC, FreeBSD and a kernel program compute; choose SipHash when
// the traffic may be hostile and no hardware hash has to match. SipHash
// costs more per tuple than a Toeplitz sum (docs/performance.md has the
// figures).
//
// # Symmetric hashing
//
// Stream reassembly wants both directions of a connection (A->B and B->A) on
// one worker. There are two ways to get that:
//
//   - [SymmetricKey]: the 16-bit pattern 0x6d5a repeated. Because the key
//     repeats every 16 bits, swapping source and destination (a shift of 32
//     or 128 bits) leaves the hash unchanged. A NIC can use it too, but it has
//     only 16 bits of entropy (the upper and lower halves of every hash are
//     equal) and, being public and fixed, cannot resist aiming.
//   - Canonical order ([Tuple] built with [Canonical] or NewTuple4Sym): the two
//     (address, port) endpoints are sorted before hashing, so any key,
//     random included, is symmetric. This is the library's recommended mode;
//     its only cost is that the hash no longer matches what a NIC computes.
package hash
