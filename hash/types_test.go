package hash

import (
	"flag"
	"testing"
)

func TestTypesText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Types
	}{
		{"ipv4,tcp_ipv4,ipv6,tcp_ipv6", DefaultTypes},
		{"IPV4, UDP_IPV4 ,ipv6", TypeIPv4 | TypeUDPIPv4 | TypeIPv6},
		{"", 0},
		{"none", 0},
	} {
		var got Types
		if err := got.UnmarshalText([]byte(tc.in)); err != nil || got != tc.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		var back Types
		b, _ := got.MarshalText()
		if err := back.UnmarshalText(b); err != nil || back != got {
			t.Errorf("%v does not round-trip through %q: %v, %v", got, b, back, err)
		}
	}
	var x Types
	if err := x.UnmarshalText([]byte("ipv4,tcp")); err == nil {
		t.Error(`"tcp" parsed as a hash type`)
	}
	if s := AllTypes.String(); s != "ipv4,tcp_ipv4,udp_ipv4,ipv6,tcp_ipv6,udp_ipv6" {
		t.Errorf("AllTypes is %q", s)
	}
	if s := (TypeIPv4 | 1).String(); s != "ipv4,0x1" {
		t.Errorf("a set with an unknown bit is %q", s)
	}
	if !DefaultTypes.Has(TypeIPv4|TypeTCPIPv6) || DefaultTypes.Has(TypeUDPIPv4) || DefaultTypes.Len() != 4 {
		t.Error("Has or Len is wrong for DefaultTypes")
	}
	// As a flag.
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	set := DefaultTypes
	fs.TextVar(&set, "hash-types", DefaultTypes, "")
	if err := fs.Parse([]string{"-hash-types", "ipv4,ipv6"}); err != nil || set != TypeIPv4|TypeIPv6 {
		t.Errorf("flag: %v, %v", set, err)
	}
}

func TestAlgorithmText(t *testing.T) {
	for _, a := range []Algorithm{AlgorithmToeplitz, AlgorithmSipHash} {
		b, err := a.MarshalText()
		var back Algorithm
		if err != nil || back.UnmarshalText(b) != nil || back != a {
			t.Errorf("%v does not round-trip: %q %v %v", a, b, err, back)
		}
	}
	var a Algorithm
	if err := a.UnmarshalText([]byte("SipHash")); err != nil || a != AlgorithmSipHash {
		t.Errorf("SipHash: %v %v", a, err)
	}
	if err := a.UnmarshalText([]byte("crc32")); err == nil {
		t.Error("crc32 parsed")
	}
	if _, err := Algorithm(9).MarshalText(); err == nil {
		t.Error("Algorithm(9) marshalled")
	}
}
