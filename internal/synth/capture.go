package synth

import (
	"fmt"
	"time"
)

// Packet is one frame of a capture: when it was captured, its bytes from
// the Ethernet header on (cut to the snap length), and its length on the
// wire (zero: len(Data)).
type Packet struct {
	Time    time.Time
	Data    []byte
	WireLen int
}

// PacketWriter writes a capture's packets in order: steer/pcapfile's
// Writer is one.
type PacketWriter interface {
	WritePacket(ts time.Time, data []byte, wireLen int) error
}

// WriteAll writes the packets to w in order.
func WriteAll(w PacketWriter, ps []Packet) error {
	for i, p := range ps {
		if err := w.WritePacket(p.Time, p.Data, p.WireLen); err != nil {
			return fmt.Errorf("synth: packet %d: %w", i, err)
		}
	}
	return nil
}

// epoch is the time of Packets' first packet.
var epoch = time.Unix(1740830400, 0)

// Packets returns frames as a capture's packets, one a millisecond from
// PacketsEpoch on, each whole on the wire.
func Packets(frames [][]byte) []Packet {
	ps := make([]Packet, len(frames))
	for i, f := range frames {
		ps[i] = Packet{Time: epoch.Add(time.Duration(i) * time.Millisecond), Data: f}
	}
	return ps
}
