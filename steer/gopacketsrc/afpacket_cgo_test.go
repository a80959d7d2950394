//go:build cgo && linux

package gopacketsrc_test

import (
	"context"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/afpacket"

	"github.com/rpsgo/rps/steer"
)

// TestRealAfpacket checks the recognition of gopacket/afpacket's own
// AncillaryVLAN and ErrTimeout, which the fakes stand for without cgo.
func TestRealAfpacket(t *testing.T) {
	s := &script{pkts: []pkt{
		{data: numbered(0, 60), ci: gopacket.CaptureInfo{Length: 60, AncillaryData: []any{afpacket.AncillaryVLAN{VLAN: 42}}}},
		{err: afpacket.ErrTimeout},
		{err: afpacket.ErrPoll},
	}}
	src := newSource(t, s)
	var b steer.Batch
	if err := src.ReadBatch(context.Background(), &b); err != nil || len(b.Frames) != 1 {
		t.Fatalf("%d frames, %v", len(b.Frames), err)
	}
	if f := b.Frames[0]; !f.HasVLAN || f.VLAN != 42 {
		t.Errorf("VLAN %v %d, want 42", f.HasVLAN, f.VLAN)
	}
	b.Release()
	if src.Stats().Timeouts != 1 {
		t.Errorf("afpacket.ErrTimeout not taken as a timeout: %+v", src.Stats())
	}
	if err := src.ReadBatch(context.Background(), &b); err == nil {
		t.Error("afpacket.ErrPoll taken as a timeout")
	}
}
