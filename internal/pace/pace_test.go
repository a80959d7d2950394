package pace

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
)

func spec() Spec {
	return Spec{Dev: "x", Frames: 1000, Rate: 100000, Size: 64,
		Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1")}
}

// TestFrames: the frames are valid UDP/IPv4 (the IP checksum holds after
// each randomization) and spread over flows.
func TestFrames(t *testing.T) {
	b := Frame(spec())
	cls, err := steer.NewClassifier(steer.HashConfig{UDP4Tuple: true})
	if err != nil {
		t.Fatal(err)
	}
	var c steer.Classification
	rng := rand.New(rand.NewPCG(1, 2))
	flows := map[uint32]bool{}
	for i := 0; i < 1000; i++ {
		Randomize(b, rng)
		var sum uint32
		for j := 14; j < 34; j += 2 {
			sum += uint32(b[j])<<8 | uint32(b[j+1])
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		if sum != 0xffff {
			t.Fatalf("frame %d: IP header checksum does not hold: %x", i, b[14:34])
		}
		cls.Classify(b, &c)
		if c.Reason != steer.ReasonOK || c.Key.Proto != 17 || c.Key.DstPort != 9 || len(b) != 64 {
			t.Fatalf("frame %d classified %+v", i, c)
		}
		flows[c.FlowID] = true
	}
	if len(flows) < 900 {
		t.Errorf("%d flowids in 1000 frames", len(flows))
	}
}

// TestArgs: a spec survives Args and ParseArgs; bad ones are refused.
func TestArgs(t *testing.T) {
	s := spec()
	s.Burst = 300
	got, err := ParseArgs(s.Args())
	if err != nil || got != s {
		t.Fatalf("ParseArgs(%q) = %+v, %v; want %+v", s.Args(), got, err, s)
	}
	for _, bad := range [][]string{
		{"x", "0", "1", "0", "64", "10.0.0.2", "10.0.0.1"},
		{"x", "1", "-1", "0", "64", "10.0.0.2", "10.0.0.1"},
		{"x", "1", "1", "-2", "64", "10.0.0.2", "10.0.0.1"},
		{"x", "1", "1", "0", "59", "10.0.0.2", "10.0.0.1"},
		{"x", "1", "1", "0", "64", "a", "10.0.0.1"},
		{"x", "1", "1", "0", "64", "::1", "10.0.0.1"},
		{"", "1", "1", "0", "64", "10.0.0.2", "10.0.0.1"},
		{"x", "1", "1", "64", "10.0.0.2", "10.0.0.1"},
	} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%q) accepted", bad)
		}
	}
}

// TestDue: the frames due over time, one at a time and in bursts: at
// 100 kpps a frame every 10 µs; in bursts of 300 at 300 kpps, 300 frames
// at each whole millisecond.
func TestDue(t *testing.T) {
	s := spec()
	for _, c := range []struct {
		burst int
		rate  int
		at    time.Duration
		due   int
		next  time.Duration // when the group after due frames is due
	}{
		{0, 100000, 0, 1, 10 * time.Microsecond},
		{0, 100000, 25 * time.Microsecond, 3, 30 * time.Microsecond},
		{1, 100000, time.Millisecond, 101, 1010 * time.Microsecond},
		{300, 300000, 0, 300, time.Millisecond},
		{300, 300000, 999 * time.Microsecond, 300, time.Millisecond},
		{300, 300000, time.Millisecond, 600, 2 * time.Millisecond},
		{300, 300000, time.Hour, 1000, 3 * time.Millisecond}, // capped at Frames; the last group is short
	} {
		s.Burst, s.Rate = c.burst, c.rate
		if got := s.due(c.at); got != c.due {
			t.Errorf("burst %d rate %d at %v: %d due, want %d", c.burst, c.rate, c.at, got, c.due)
		}
		if got := s.next(min(c.due, 900)); c.due < s.Frames && got != c.next {
			t.Errorf("burst %d rate %d after %d: next group at %v, want %v", c.burst, c.rate, c.due, got, c.next)
		}
	}
	s.Rate = 0
	if got := s.due(0); got != s.Frames {
		t.Errorf("rate 0: %d due at once, want all %d", got, s.Frames)
	}
	// Every frame is due once, in order, over the run.
	s.Rate, s.Burst = 300000, 300
	var dues []int
	for at := time.Duration(0); at < 5*time.Millisecond; at += 100 * time.Microsecond {
		dues = append(dues, s.due(at))
	}
	if !slices.IsSorted(dues) || dues[len(dues)-1] != s.Frames {
		t.Errorf("due over 5ms: %v", dues)
	}
}

// TestStamp: a stamped frame gives back its time; others give none.
func TestStamp(t *testing.T) {
	b := Frame(spec())
	if _, ok := Stamped(b); ok {
		t.Error("an unstamped frame has a stamp")
	}
	now := time.Unix(1700000000, 123456789)
	stamp(b, now)
	if got, ok := Stamped(b); !ok || !got.Equal(now) {
		t.Errorf("stamped %v, read %v %v", now, got, ok)
	}
	if _, ok := Stamped(b[:53]); ok {
		t.Error("a frame cut short has a stamp")
	}
}
