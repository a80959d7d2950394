package synth

import (
	"errors"
	"testing"
	"time"
)

// recorder is a PacketWriter that keeps what it is given and fails at
// packet failAt.
type recorder struct {
	ps     []Packet
	failAt int
}

var errFull = errors.New("full")

func (r *recorder) WritePacket(ts time.Time, data []byte, wireLen int) error {
	if len(r.ps) == r.failAt {
		return errFull
	}
	r.ps = append(r.ps, Packet{ts, data, wireLen})
	return nil
}

// TestWriteAll: Packets spaces frames a millisecond apart, WriteAll writes
// them in order and stops at the writer's first error, which it wraps.
func TestWriteAll(t *testing.T) {
	frames := [][]byte{{1}, {2, 2}, {3, 3, 3}}
	r := &recorder{failAt: -1}
	if err := WriteAll(r, Packets(frames)); err != nil {
		t.Fatal(err)
	}
	for i, p := range r.ps {
		if string(p.Data) != string(frames[i]) || p.WireLen != 0 || p.Time.Sub(r.ps[0].Time) != time.Duration(i)*time.Millisecond {
			t.Errorf("packet %d: %+v", i, p)
		}
	}
	if len(r.ps) != 3 {
		t.Errorf("%d packets written, want 3", len(r.ps))
	}
	r = &recorder{failAt: 1}
	if err := WriteAll(r, Packets(frames)); !errors.Is(err, errFull) || len(r.ps) != 1 {
		t.Errorf("WriteAll into a writer failing at the second packet: %v after %d packets", err, len(r.ps))
	}
}
