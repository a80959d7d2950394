package filter

import (
	"encoding/binary"

	"golang.org/x/net/bpf"
)

// skbMeta is what a live socket's filter sees besides the frame: the VLAN
// tag the kernel took out of it.
type skbMeta struct {
	tci     uint16
	present bool
}

// runLive runs a classic BPF program over frame as the kernel does on a
// live socket: as golang.org/x/net/bpf's virtual machine does (which the
// differential tests check), plus the ancillary loads of the VLAN tag.
// It returns the program's return value; a load past the end, or a
// division by zero, returns 0.
func runLive(prog []bpf.RawInstruction, frame []byte, m skbMeta) uint32 {
	v, _ := runLiveShort(prog, frame, m)
	return v
}

// runLiveShort is runLive, and whether the program stopped at a load past
// the frame's end.
func runLiveShort(prog []bpf.RawInstruction, frame []byte, m skbMeta) (uint32, bool) {
	var a, x uint32
	var mem [16]uint32
	load := func(off uint64, size int) (uint32, bool) {
		if off+uint64(size) > uint64(len(frame)) {
			return 0, false
		}
		switch size {
		case 4:
			return binary.BigEndian.Uint32(frame[off:]), true
		case 2:
			return uint32(binary.BigEndian.Uint16(frame[off:])), true
		}
		return uint32(frame[off]), true
	}
	sizes := map[uint16]int{0x00: 4, 0x08: 2, 0x10: 1}
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		k := ins.K
		switch op := ins.Op; {
		case op&7 == 0 && op&0xe0 == 0x20: // ld [k]
			if k >= skfAdOff {
				switch k - skfAdOff {
				case 44:
					a = uint32(m.tci)
				case 48:
					a = 0
					if m.present {
						a = 1
					}
				default:
					a = 0
				}
				continue
			}
			v, ok := load(uint64(k), sizes[op&0x18])
			if !ok {
				return 0, true
			}
			a = v
		case op&7 == 0 && op&0xe0 == 0x40: // ld [x+k]
			v, ok := load(uint64(x)+uint64(k), sizes[op&0x18])
			if !ok {
				return 0, true
			}
			a = v
		case op == 0x00:
			a = k
		case op == 0x80:
			a = uint32(len(frame))
		case op == 0x60:
			a = mem[k&15]
		case op == 0x01:
			x = k
		case op == 0x61:
			x = mem[k&15]
		case op == 0xb1:
			v, ok := load(uint64(k), 1)
			if !ok {
				return 0, true
			}
			x = 4 * (v & 0xf)
		case op == 0x02:
			mem[k&15] = a
		case op == 0x03:
			mem[k&15] = x
		case op&7 == 4: // alu
			v := k
			if op&8 != 0 {
				v = x
			}
			switch op & 0xf0 {
			case 0x00:
				a += v
			case 0x10:
				a -= v
			case 0x20:
				a *= v
			case 0x30:
				if v == 0 {
					return 0, false
				}
				a /= v
			case 0x40:
				a |= v
			case 0x50:
				a &= v
			case 0x60:
				a = uint32(uint64(a) << v)
			case 0x70:
				a = uint32(uint64(a) >> v)
			case 0x80:
				a = -a
			case 0x90:
				if v == 0 {
					return 0, false
				}
				a %= v
			case 0xa0:
				a ^= v
			}
		case op == 0x05:
			pc += int(k)
		case op&7 == 5: // conditional jump
			v := k
			if op&8 != 0 {
				v = x
			}
			var t bool
			switch op & 0xf0 {
			case 0x10:
				t = a == v
			case 0x20:
				t = a > v
			case 0x30:
				t = a >= v
			case 0x40:
				t = a&v != 0
			}
			if t {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case op == 0x06:
			return k, false
		case op == 0x16:
			return a, false
		case op == 0x07:
			x = a
		case op == 0x87:
			a = x
		default:
			return 0, false
		}
	}
	return 0, false
}

// liveView returns what a live socket's filter sees of frame: the frame
// and no tag, or, when the frame has an outer 802.1Q or 802.1ad tag and
// stripped is set, the frame without it and the tag in the metadata.
func liveView(frame []byte, stripped bool) ([]byte, skbMeta, bool) {
	if !stripped {
		return frame, skbMeta{}, true
	}
	if len(frame) < 18 {
		return nil, skbMeta{}, false
	}
	if tpid := binary.BigEndian.Uint16(frame[12:]); tpid != 0x8100 && tpid != 0x88a8 {
		return nil, skbMeta{}, false
	}
	out := append(append([]byte(nil), frame[:12]...), frame[16:]...)
	return out, skbMeta{tci: binary.BigEndian.Uint16(frame[14:]), present: true}, true
}
