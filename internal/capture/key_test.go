package capture

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
)

// TestParseKey: the names, hex in its three spellings, and what KeyHex
// prints reads back as the same key; lengths and names a function cannot
// take are errors.
func TestParseKey(t *testing.T) {
	ms := hash.MicrosoftKey[:]
	for _, tc := range []struct {
		s    string
		alg  hash.Algorithm
		want []byte
	}{
		{"random", hash.AlgorithmToeplitz, nil},
		{"random", hash.AlgorithmSipHash, nil},
		{"microsoft", hash.AlgorithmToeplitz, ms},
		{"symmetric", hash.AlgorithmToeplitz, hash.SymmetricKey[:]},
		{KeyHex(ms), hash.AlgorithmToeplitz, ms},
		{"0x" + strings.ToUpper(KeyHex(ms)), hash.AlgorithmToeplitz, ms},
		{strings.Repeat("a5:", hash.SipHashKeyLen-1) + "a5", hash.AlgorithmSipHash, bytes.Repeat([]byte{0xa5}, hash.SipHashKeyLen)},
	} {
		got, err := ParseKey(tc.s, tc.alg)
		if err != nil || !bytes.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("ParseKey(%q, %v) = %x, %v; want %x", tc.s, tc.alg, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		s   string
		alg hash.Algorithm
	}{
		{"micro", hash.AlgorithmToeplitz},
		{"zz", hash.AlgorithmToeplitz},
		{strings.Repeat("5a", MinKeyLen-1), hash.AlgorithmToeplitz},
		{strings.Repeat("5a", hash.MaxKeyLen+1), hash.AlgorithmToeplitz},
		{"microsoft", hash.AlgorithmSipHash},
		{KeyHex(ms), hash.AlgorithmSipHash},
	} {
		if k, err := ParseKey(tc.s, tc.alg); err == nil {
			t.Errorf("ParseKey(%q, %v) = %x, want an error", tc.s, tc.alg, k)
		}
	}
}
