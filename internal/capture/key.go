package capture

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rpsgo/rps/hash"
)

// MinKeyLen is the shortest Toeplitz key the dispatcher takes: an IPv6
// 4-tuple's 36 bytes and 4 more (HashConfig.Key).
const MinKeyLen = hash.IPv6Tuple4Len + 4

// KeyUsage is the help text of -key, alike in both commands.
var KeyUsage = fmt.Sprintf("hash `key`: random (a new key each run, so flowids and workers change from run to run); "+
	"for toeplitz also microsoft (the NIC default: reproducible flowids), symmetric, or %d to %d bytes in hex; "+
	"for siphash %d bytes in hex", MinKeyLen, hash.MaxKeyLen, hash.SipHashKeyLen)

// ParseKey returns the key -key names for the hash function alg: nil for
// "random" (the dispatcher draws one; the report names it by its
// fingerprint), the Microsoft or the symmetric Toeplitz key by name, or
// a key in hex (a 0x prefix and colons allowed, as KeyHex prints it). Its
// errors say what was wrong; the commands wrap them as usage errors.
func ParseKey(s string, alg hash.Algorithm) ([]byte, error) {
	sip := alg == hash.AlgorithmSipHash
	switch s {
	case "random":
		return nil, nil
	case "microsoft", "symmetric":
		if sip {
			return nil, fmt.Errorf("%s is a Toeplitz key: -hash siphash takes random or %d bytes in hex", s, hash.SipHashKeyLen)
		}
		if s == "microsoft" {
			return hash.MicrosoftKey[:], nil
		}
		return hash.SymmetricKey[:], nil
	}
	h := strings.ReplaceAll(strings.TrimPrefix(strings.ToLower(s), "0x"), ":", "")
	key, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("%q is neither random, microsoft, symmetric nor hex: %w", s, err)
	}
	switch {
	case sip && len(key) != hash.SipHashKeyLen:
		return nil, fmt.Errorf("a SipHash key of %d bytes: want %d", len(key), hash.SipHashKeyLen)
	case !sip && (len(key) < MinKeyLen || len(key) > hash.MaxKeyLen):
		return nil, fmt.Errorf("a key of %d bytes: want %d to %d", len(key), MinKeyLen, hash.MaxKeyLen)
	}
	return key, nil
}

// KeyHex prints a key as -key takes it back: lower-case hex, no prefix.
func KeyHex(key []byte) string { return hex.EncodeToString(key) }
