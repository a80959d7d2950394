package gopacketsrc_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// pcapOf writes records as a classic pcap file of link type lt, with
// nanosecond timestamps.
func pcapOf(lt pcapfile.LinkType, recs [][]byte) []byte {
	var b bytes.Buffer
	w, err := pcapfile.NewWriter(&b, lt, pcapfile.WriterOptions{SnapLen: 65535, Nanosecond: true})
	for i := 0; err == nil && i < len(recs); i++ {
		err = w.WritePacket(time.Unix(int64(1000+i), int64(i)), recs[i], len(recs[i])+7)
	}
	if err != nil { // a bytes.Buffer does not fail, nor do these times
		panic(err)
	}
	return b.Bytes()
}

// records gives, for each link type, packets with its link-layer header
// in front of an IPv4 or IPv6 packet, and runts.
func records(lt pcapfile.LinkType) [][]byte {
	ip4 := append([]byte{0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}, make([]byte, 20)...)
	ip6 := append([]byte{0x60, 0, 0, 0, 0, 20, 17, 64}, make([]byte, 32+20)...)
	be16 := func(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
	cat := func(p ...[]byte) []byte { return bytes.Join(p, nil) }
	switch lt {
	case pcapfile.LinkTypeLinuxSLL:
		sll := func(proto uint16, alen uint16) []byte {
			return cat(be16(0), be16(1), be16(alen), []byte{1, 2, 3, 4, 5, 6, 7, 8}, be16(proto))
		}
		return [][]byte{cat(sll(0x0800, 6), ip4), cat(sll(0x86dd, 4), ip6), sll(0x0800, 6)[:10], nil}
	case pcapfile.LinkTypeLinuxSLL2:
		sll2 := func(proto uint16, ifi uint32, alen byte) []byte {
			return cat(be16(proto), be16(0), binary.BigEndian.AppendUint32(nil, ifi), be16(1), []byte{0, alen}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
		}
		return [][]byte{cat(sll2(0x0800, 7, 6), ip4), cat(sll2(0x86dd, 9, 8), ip6), sll2(0x0800, 7, 6)[:19]}
	case pcapfile.LinkTypeNull:
		return [][]byte{cat([]byte{2, 0, 0, 0}, ip4), cat([]byte{0, 0, 0, 30}, ip6), cat([]byte{24, 0, 0, 0}, ip6), {2, 0}}
	case pcapfile.LinkTypeLoop:
		return [][]byte{cat([]byte{0, 0, 0, 2}, ip4), cat([]byte{0, 0, 0, 28}, ip6), {0}}
	case pcapfile.LinkTypePPP, pcapfile.LinkTypePPPHDLC:
		return [][]byte{cat([]byte{0xff, 0x03, 0x00, 0x21}, ip4), cat([]byte{0x00, 0x57}, ip6), cat([]byte{0xff, 0x03, 0xc0, 0x21}, ip4[:8]), {0xff}}
	case pcapfile.LinkTypeIPv4:
		return [][]byte{ip4, nil}
	case pcapfile.LinkTypeIPv6:
		return [][]byte{ip6, ip6[:3]}
	}
	return [][]byte{ip4, ip6, {0x99}, nil} // RAW and its aliases
}

// TestLinkTypesAsPcapfile reads each link type pcapfile rewrites through
// the adapter and through pcapfile, and compares every frame.
func TestLinkTypesAsPcapfile(t *testing.T) {
	for _, lt := range []pcapfile.LinkType{
		pcapfile.LinkTypeNull, pcapfile.LinkTypeRaw, pcapfile.LinkTypeRawAlt12, pcapfile.LinkTypeRawAlt14,
		pcapfile.LinkTypeLoop, pcapfile.LinkTypeLinuxSLL, pcapfile.LinkTypeLinuxSLL2,
		pcapfile.LinkTypeIPv4, pcapfile.LinkTypeIPv6, pcapfile.LinkTypePPP, pcapfile.LinkTypePPPHDLC,
	} {
		recs := records(lt)
		file := pcapOf(lt, recs)
		ref, err := pcapfile.NewReader(bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := readAll(t, ref)
		if err != io.EOF {
			t.Fatal(err)
		}
		var pkts []pkt
		for i, r := range recs {
			pkts = append(pkts, pkt{data: r, ci: gopacket.CaptureInfo{Timestamp: time.Unix(int64(1000+i), int64(i)),
				CaptureLength: len(r), Length: len(r) + 7}})
		}
		src, err := gopacketsrc.NewZeroCopy(&script{pkts: pkts}, lt, gopacketsrc.WithBatchSize(2))
		if err != nil {
			t.Fatalf("%s: %v", lt, err)
		}
		got, _, err := readAll(t, src)
		if err != io.EOF || len(got) != len(want) {
			t.Fatalf("%s: %d frames, %v; pcapfile reads %d", lt, len(got), err, len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if !bytes.Equal(g.Data, w.Data) || g.WireLen != w.WireLen || g.IfIndex != w.IfIndex || !g.Timestamp.Equal(w.Timestamp) {
				t.Errorf("%s frame %d:\n got % x len %d if %d\nwant % x len %d if %d", lt, i, g.Data, g.WireLen, g.IfIndex, w.Data, w.WireLen, w.IfIndex)
			}
		}
		if r, w := src.Stats().Runts, ref.Stats().Runts; r != w {
			t.Errorf("%s: %d runts, pcapfile counts %d", lt, r, w)
		}
	}
}
