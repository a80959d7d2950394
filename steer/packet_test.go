package steer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// TestPacketKey checks that the key a handler gets from Packet.Key, which
// the queued path derives in the worker, is the classifier's, for every
// frame of the sample capture (TCP, UDP, IPv6, VLAN-tagged, ARP, malformed),
// in every dispatch mode, and also with a hash the source supplied, with
// and without each frame's first VLAN tag given out of band; and with the
// classifier's options, which change the hash input of the queued path's
// batch (UDP 4-tuples, symmetric order).
func TestPacketKey(t *testing.T) {
	src, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		t.Fatal(err)
	}
	var frames []steer.Frame
	for {
		var b steer.Batch
		err := src.ReadBatch(context.Background(), &b)
		for _, f := range b.Frames {
			f.Data = append([]byte(nil), f.Data...)
			frames = append(frames, f)
		}
		if b.Release != nil {
			b.Release()
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The same frames again with a source hash, with and without an
	// out-of-band tag.
	n := len(frames)
	for i := range n {
		for _, tagged := range []bool{true, false} {
			f := frames[i]
			f.Data = append([]byte(nil), f.Data...)
			if tagged {
				f.HasVLAN, f.VLAN = true, uint16(100+i%7)
			}
			f.FlowID, f.HashType = uint32(i)*2654435761, hash.RSSTCPIPv4
			frames = append(frames, f)
		}
	}
	type options struct{ symmetric, udp4 bool }
	for _, o := range []options{{}, {udp4: true}, {symmetric: true}, {symmetric: true, udp4: true}} {
		t.Run(fmt.Sprintf("symmetric=%v/udp4=%v", o.symmetric, o.udp4), func(t *testing.T) {
			checkPacketKeys(t, frames, o.symmetric, o.udp4)
		})
	}
}

// checkPacketKeys dispatches frames in every mode and checks each packet's
// key, flowid, hash type and reason against the classifier's.
func checkPacketKeys(t *testing.T, frames []steer.Frame, symmetric, udp4 bool) {
	cls := msClassifier(t, symmetric, udp4)
	want := make([]steer.Classification, len(frames))
	byData := map[*byte]int{}
	for i := range frames {
		f := &frames[i]
		if f.HasVLAN {
			cls.ClassifyVLAN(f.Data, f.VLAN, &want[i])
		} else {
			cls.Classify(f.Data, &want[i])
		}
		if f.HashType != hash.None {
			want[i].FlowID, want[i].HashType = f.FlowID, f.HashType
		}
		if len(f.Data) > 0 {
			byData[&f.Data[0]] = i
		}
	}
	for _, mode := range []steer.DispatchMode{steer.DispatchDeferred, steer.DispatchHybrid, steer.DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			var mu sync.Mutex
			seen, bad := 0, 0
			d, err := steer.New(steer.Config{Workers: 3, Dispatch: mode, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:], Symmetric: symmetric, UDP4Tuple: udp4}, Queue: steer.QueueConfig{Overflow: steer.OverflowWait}}, func(p *steer.Packet) {
				mu.Lock()
				defer mu.Unlock()
				if len(p.Data) == 0 {
					return
				}
				i, ok := byData[&p.Data[0]]
				if !ok {
					bad++
					return
				}
				seen++
				w := &want[i]
				k := p.Key()
				if k != w.Key || p.Key() != k || p.FlowID != w.FlowID || p.HashType != w.HashType || p.Reason != w.Reason {
					bad++
					if bad <= 5 {
						t.Errorf("frame %d: key %+v flowid %#x %v %v; classifier: %+v %#x %v %v",
							i, k, p.FlowID, p.HashType, p.Reason, w.Key, w.FlowID, w.HashType, w.Reason)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			in := d.NewInput()
			for i := 0; i < len(frames); i += 50 {
				if err := in.Dispatch(frames[i:min(i+50, len(frames))], nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			empty := 0
			for i := range frames {
				if len(frames[i].Data) == 0 {
					empty++
				}
			}
			if seen != len(frames)-empty || bad != 0 {
				t.Errorf("%d of %d frames checked, %d wrong", seen, len(frames)-empty, bad)
			}
		})
	}
}

// TestPacketKeyRecycled checks that a packet recycled for another frame
// never returns the key derived for the frame it carried before. The
// handler's goroutine keeps the latest key it derived, tagged with the
// packet: with one frame per batch and one worker, the same packet comes
// back at once for the next frame, so a key kept across the reuse would
// show (QLimit 1 keeps the input from running ahead with other batches).
// It also covers DIRECT, where one scratch packet carries every
// frame and the input hands the key over when it has one.
func TestPacketKeyRecycled(t *testing.T) {
	raw := synth.Frames(synth.Spec{Flows: 50, Seed: 3}, 400)
	// Tagged copies: DIRECT classifies them fully, so it hands the key over.
	for i := range 100 {
		f := raw[i]
		tagged := make([]byte, 0, len(f)+4)
		tagged = append(tagged, f[:12]...)
		tagged = append(tagged, 0x81, 0x00, 0, byte(10+i%5))
		raw = append(raw, append(tagged, f[12:]...))
	}
	cls := msClassifier(t, false, false)
	for _, mode := range []steer.DispatchMode{steer.DispatchDeferred, steer.DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			var mu sync.Mutex
			var got []steer.FlowKey
			d, err := steer.New(steer.Config{Workers: 1, Dispatch: mode, Queue: steer.QueueConfig{Overflow: steer.OverflowWait, Limit: 1}}, func(p *steer.Packet) {
				mu.Lock()
				defer mu.Unlock()
				// Every other frame leaves its key alone, so the key kept
				// is often that of the packet now coming back.
				var k steer.FlowKey
				if len(got)%2 == 0 {
					k = p.Key()
					if k2 := p.Key(); k2 != k {
						t.Errorf("Key changed between two calls: %+v then %+v", k, k2)
					}
				}
				got = append(got, k)
			})
			if err != nil {
				t.Fatal(err)
			}
			in := d.NewInput()
			for _, b := range raw {
				if err := in.Dispatch([]steer.Frame{{Data: b}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(raw) {
				t.Fatalf("handled %d of %d frames", len(got), len(raw))
			}
			var c steer.Classification
			for i, b := range raw {
				if i%2 == 1 {
					continue
				}
				cls.Classify(b, &c)
				if got[i] != c.Key {
					t.Fatalf("frame %d: key %+v, want %+v", i, got[i], c.Key)
				}
			}
		})
	}
}

// TestPacketKeyAcrossRedispatch checks that a handler keeps its frame's key
// when it re-dispatches an inner frame that is handled inline, in its own
// goroutine, and asks for its own key: the outer handler rewrites its
// frame's addresses in place after Key, as Key's doc allows, so a key
// derived again would show.
func TestPacketKeyAcrossRedispatch(t *testing.T) {
	const n = 200
	cls := msClassifier(t, false, false)
	for _, mode := range []steer.DispatchMode{steer.DispatchDeferred, steer.DispatchHybrid, steer.DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			raw := synth.Frames(synth.Spec{Flows: 50, Seed: 5}, n+7)
			frames := make([]steer.Frame, n)
			want := map[*byte]steer.FlowKey{}
			var c steer.Classification
			for i := range frames {
				outer := append(append([]byte(nil), raw[i]...), raw[i+7]...)
				frames[i] = steer.Frame{Data: outer}
				cls.Classify(outer, &c)
				want[&outer[0]] = c.Key
				cls.Classify(outer[64:], &c)
				want[&outer[64]] = c.Key
			}
			var mu sync.Mutex
			checked := 0
			outerDone := make(chan struct{}, 1)
			handler := func(p *steer.Packet) {
				if len(p.Data) > 64 {
					defer func() { outerDone <- struct{}{} }()
				}
				mu.Lock()
				w, ok := want[&p.Data[0]]
				mu.Unlock()
				if !ok {
					t.Error("a frame the test did not send")
					return
				}
				k := p.Key()
				if k != w {
					t.Errorf("key %+v, want %+v", k, w)
				}
				if len(p.Data) <= 64 {
					return
				}
				clear(p.Data[26:34]) // the outer addresses, rewritten in place
				if err := p.Redispatch(p.Data[64:]); err != nil {
					t.Error(err)
				}
				if k2 := p.Key(); k2 != w {
					t.Errorf("after Redispatch: key %+v, want %+v", k2, w)
				}
				mu.Lock()
				checked++
				mu.Unlock()
			}
			d, err := steer.New(steer.Config{Workers: 1, Dispatch: mode, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}, Queue: steer.QueueConfig{Overflow: steer.OverflowWait}}, handler)
			if err != nil {
				t.Fatal(err)
			}
			in := d.NewInput()
			// One frame at a time, each handled before the next is sent, so
			// that the worker's queue is empty when it re-dispatches: then
			// HYBRID runs the inner frame inline.
			for i := range frames {
				if err := in.Dispatch(frames[i:i+1], nil); err != nil {
					t.Fatal(err)
				}
				<-outerDone
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if checked != n {
				t.Errorf("%d of %d outer frames checked", checked, n)
			}
			// The case under test: inner frames handled inline.
			if ws := d.Stats().Workstreams[0]; mode != steer.DispatchDeferred && ws.HybridDispatched+ws.DirectDispatched == 0 {
				t.Errorf("no frame was handled inline")
			}
		})
	}
}

// msClassifier is a classifier with the Microsoft key and the given
// options, the dispatchers' classifier in these tests.
func msClassifier(t *testing.T, symmetric, udp4 bool) *steer.Classifier {
	t.Helper()
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		t.Fatal(err)
	}
	cls, err := steer.NewClassifier(steer.HashConfig{Key: h.Key(), Symmetric: symmetric, UDP4Tuple: udp4})
	if err != nil {
		t.Fatal(err)
	}
	return cls
}
