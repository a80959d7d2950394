package gopacketsrc_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/gopacketsrc/internal/fake/gopacket/afpacket"
	"github.com/rpsgo/rps/steer/gopacketsrc/internal/fake/gopacket/pcap"
)

// filled returns n bytes of a pattern that depends on i.
func filled(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	return b
}

// FuzzReadBatch reads a packet source scripted by the input (packets of
// any size from empty to past MaxPacketLen, odd lengths, ancillary VLANs,
// timeouts and errors) with any batch size, holding up to a few batches
// unreleased, and checks every frame against the packet it came from and
// every error against the script.
func FuzzReadBatch(f *testing.F) {
	f.Add([]byte{63, 0, 0, 60, 1, 5, 220, 5, 0, 0, 6, 0, 0, 7, 200, 10})
	f.Add([]byte{0, 4, 255, 255, 4, 255, 255, 7, 1, 0})
	f.Add([]byte{3, 2, 200, 0, 2, 200, 0, 2, 200, 0, 5, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		bs := int(in[0])%64 + 1
		hold := int(in[0]>>6) + 1
		in = in[1:]
		var pkts []pkt
		type want struct {
			data   []byte
			length int
			vlan   int // -1: none
		}
		var wants []want
		var errs, total int
		for len(in) >= 3 && total < 1<<20 {
			kind, x, y := in[0]%8, int(in[1]), int(in[2])
			in = in[3:]
			i := len(wants)
			switch kind {
			case 5:
				pkts = append(pkts, pkt{err: pcap.NextErrorTimeoutExpired})
				continue
			case 6:
				pkts = append(pkts, pkt{err: errors.New("read failed")})
				errs++
				continue
			case 7:
				// A small packet whose wire length may be below its captured
				// length, with a VLAN id that may be out of range.
				vlan := (x - 128) * 40
				d := filled(i, y)
				pkts = append(pkts, pkt{data: d, ci: gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0),
					Length: x, AncillaryData: []any{afpacket.AncillaryVLAN{VLAN: vlan}}}})
				w := want{data: d, length: max(x, y), vlan: vlan}
				if vlan < 0 || vlan > 4095 {
					w.vlan = -1
				}
				wants = append(wants, w)
				continue
			}
			n := (x<<8 | y) * (int(kind) + 1)
			total += n
			d := filled(i, n)
			pkts = append(pkts, pkt{data: d, ci: gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), Length: n}})
			wants = append(wants, want{data: d[:min(n, gopacketsrc.MaxPacketLen)], length: n, vlan: -1})
		}
		s := &script{pkts: pkts}
		src, err := gopacketsrc.NewZeroCopy(s, 1, gopacketsrc.WithBatchSize(bs))
		if err != nil {
			t.Fatal(err)
		}
		type heldBatch struct {
			b     steer.Batch
			first int
		}
		var held []heldBatch
		check := func(h heldBatch) {
			for k, f := range h.b.Frames {
				w := wants[h.first+k]
				if string(f.Data) != string(w.data) {
					t.Fatalf("frame %d: %d bytes differ from the %d of its packet", h.first+k, len(f.Data), len(w.data))
				}
				if f.WireLen != w.length || f.Timestamp.Unix() != int64(h.first+k) || f.HasVLAN != (w.vlan >= 0) ||
					(f.HasVLAN && int(f.VLAN) != w.vlan) {
					t.Fatalf("frame %d: length %d, time %v, vlan %v %d; want %d, %d, %d",
						h.first+k, f.WireLen, f.Timestamp, f.HasVLAN, f.VLAN, w.length, h.first+k, w.vlan)
				}
			}
			h.b.Release()
		}
		next, gotErrs := 0, 0
		for calls := 0; ; calls++ {
			if calls > 2*len(pkts)+2 {
				t.Fatal("the source does not end")
			}
			var b steer.Batch
			err := src.ReadBatch(context.Background(), &b)
			if err == io.EOF {
				break
			}
			if err != nil {
				gotErrs++
				if len(b.Frames) != 0 || b.Release != nil {
					t.Fatalf("an error with %d frames", len(b.Frames))
				}
				continue
			}
			if len(b.Frames) > bs {
				t.Fatalf("a batch of %d frames, batch size %d", len(b.Frames), bs)
			}
			if len(b.Frames) == 0 {
				continue
			}
			held = append(held, heldBatch{b, next})
			next += len(b.Frames)
			if len(held) > hold {
				check(held[0])
				held = held[1:]
			}
		}
		for _, h := range held {
			check(h)
		}
		if next != len(wants) || gotErrs != errs {
			t.Fatalf("%d frames and %d errors, want %d and %d", next, gotErrs, len(wants), errs)
		}
	})
}
