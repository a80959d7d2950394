package main

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/steer/pcapfile"
)

// TestSample meters the sample on one worker and on three: every frame
// is in a record, connections end idle by capture time though the replay
// takes milliseconds, the busiest records count both directions of their
// connection, and the records do not depend on the number of workers.
func TestSample(t *testing.T) {
	one, err := run("", 1)
	if err != nil {
		t.Fatal(err)
	}
	three, err := run("", 3)
	if err != nil {
		t.Fatal(err)
	}
	if one.frames == 0 || one.packets != one.frames {
		t.Errorf("%d frames handled, %d in records", one.frames, one.packets)
	}
	if one.ends["expired"] == 0 {
		t.Errorf("no record expired: %v", one.ends)
	}
	for _, r := range one.top[:3] {
		if r.key.Proto != 6 || r.packets[0] == 0 || r.packets[1] == 0 {
			t.Errorf("busy record %v: %d and %d packets each way, want a TCP connection, both ways", r.key, r.packets[0], r.packets[1])
		}
	}
	if !reflect.DeepEqual(one.summary, three.summary) {
		t.Errorf("records differ: one worker %v, three %v (or their busiest)", one.ends, three.ends)
	}
}

// TestUDPFlowsBetweenTwoHosts meters 40 UDP flows between two hosts: UDP's
// flowid hashes the addresses only, so all 40 share one, and a record filed
// by the flowid alone would crowd the others out of their bucket.
func TestUDPFlowsBetweenTwoHosts(t *testing.T) {
	name := filepath.Join(t.TempDir(), "udp.pcap")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcapfile.NewWriter(f, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const flows = 40
	for i := range 2 * flows { // two frames a flow
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
		udp := &layers.UDP{SrcPort: layers.UDPPort(10000 + i%flows), DstPort: 53}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload("query")); err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(start.Add(time.Duration(i)*time.Millisecond), buf.Bytes(), len(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := run(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.ends["open"] != flows || res.ends["evicted"] != 0 || res.top[0].packets[0] != 2 {
		t.Errorf("%d flows of two frames each: records %v, the busiest %d frames", flows, res.ends, res.top[0].packets[0])
	}
}
