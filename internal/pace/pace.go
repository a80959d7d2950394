package pace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"
)

// ErrNotSupported is returned by Send on systems without AF_PACKET.
var ErrNotSupported = errors.New("pace: sending needs Linux")

// Spec is what Send sends: Frames UDP/IPv4 frames of Size bytes from Src
// to Dst port 9 out of the interface Dev, at Rate frames a second (0: as
// fast as they go), Burst at a time (0 or 1: each frame at its own due
// time).
type Spec struct {
	Dev      string
	Frames   int
	Rate     int
	Burst    int
	Size     int
	Src, Dst netip.Addr
	// Stamp writes into each frame the time it is handed to the kernel
	// (Stamped reads it), for the latency from send to handler.
	Stamp bool
}

// stampMagic marks a stamped frame at UDP payload offset 0 (frame offset
// 42); the Unix time in nanoseconds follows, big-endian.
const stampMagic = 0x52505354 // "RPST"

// Stamped returns the send time a frame of a Spec with Stamp carries.
func Stamped(b []byte) (time.Time, bool) {
	if len(b) < 54 || binary.BigEndian.Uint32(b[42:]) != stampMagic {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b[46:]))), true
}

// stamp writes t into frame b (a Frame of 60 bytes or more).
func stamp(b []byte, t time.Time) {
	binary.BigEndian.PutUint32(b[42:], stampMagic)
	binary.BigEndian.PutUint64(b[46:], uint64(t.UnixNano()))
}

// Batch is the most frames one sendmmsg call hands the kernel.
const Batch = 64

// Check returns an error when s cannot be sent.
func (s Spec) Check() error {
	switch {
	case s.Dev == "":
		return fmt.Errorf("pace: no interface")
	case s.Frames < 1:
		return fmt.Errorf("pace: %d frames: want at least one", s.Frames)
	case s.Rate < 0:
		return fmt.Errorf("pace: negative rate %d", s.Rate)
	case s.Burst < 0:
		return fmt.Errorf("pace: negative burst %d", s.Burst)
	case s.Size < 60 || s.Size > 1514:
		return fmt.Errorf("pace: frame size %d: want 60 to 1514 bytes", s.Size)
	case !s.Src.Is4() || !s.Dst.Is4():
		return fmt.Errorf("pace: addresses %v and %v: want IPv4", s.Src, s.Dst)
	}
	return nil
}

// Args returns s as ParseArgs reads it: dev, frames, rate, burst, size,
// src and dst (not Stamp), for a sender in a process of its own.
func (s Spec) Args() []string {
	return []string{s.Dev, strconv.Itoa(s.Frames), strconv.Itoa(s.Rate), strconv.Itoa(s.Burst), strconv.Itoa(s.Size),
		s.Src.String(), s.Dst.String()}
}

// ParseArgs parses what Spec.Args returns, and checks it.
func ParseArgs(args []string) (Spec, error) {
	var s Spec
	if len(args) != 7 {
		return s, fmt.Errorf("pace: want 7 arguments (dev frames rate burst size src dst), have %d", len(args))
	}
	s.Dev = args[0]
	var errs []error
	atoi := func(v string) int {
		n, err := strconv.Atoi(v)
		errs = append(errs, err)
		return n
	}
	s.Frames, s.Rate, s.Burst, s.Size = atoi(args[1]), atoi(args[2]), atoi(args[3]), atoi(args[4])
	var err error
	s.Src, err = netip.ParseAddr(args[5])
	errs = append(errs, err)
	s.Dst, err = netip.ParseAddr(args[6])
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("pace: %q: %w", args, err)
	}
	return s, s.Check()
}

// due returns how many of s's frames are due el after the first: those
// of every group whose time has come.
func (s Spec) due(el time.Duration) int {
	if s.Rate == 0 {
		return s.Frames
	}
	burst := max(s.Burst, 1)
	every := time.Duration(burst) * time.Second / time.Duration(s.Rate) // a group's period
	return min((int(el/every)+1)*burst, s.Frames)
}

// next returns when the group after the first sent frames is due.
func (s Spec) next(sent int) time.Duration {
	burst := max(s.Burst, 1)
	return time.Duration(sent/burst) * time.Duration(burst) * time.Second / time.Duration(s.Rate)
}

// Frame returns one of s's frames, before Randomize: UDP/IPv4 of s.Size
// bytes from s.Src to s.Dst port 9, broadcast at the Ethernet layer, its
// UDP checksum zero.
func Frame(s Spec) []byte {
	b := make([]byte, s.Size)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 0x02})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(s.Size-14))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	src, dst := s.Src.As4(), s.Dst.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(b[36:], 9)
	binary.BigEndian.PutUint16(b[38:], uint16(s.Size-34))
	return b
}

// Randomize gives a frame of Frame a random source address byte, IP id
// and source port, and its IP header checksum again.
func Randomize(b []byte, rng *rand.Rand) {
	v := rng.Uint64()
	ip := b[14:34]
	ip[15] = byte(v)
	binary.BigEndian.PutUint16(ip[4:], uint16(v>>8))
	binary.BigEndian.PutUint16(b[34:], uint16(v>>24))
	SetIPChecksum(ip)
}

// SetIPChecksum writes the checksum of ip, an IPv4 header of 20 bytes
// (no options), into its checksum field.
func SetIPChecksum(ip []byte) {
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}
