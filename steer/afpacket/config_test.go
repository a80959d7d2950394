package afpacket

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
)

func TestConfigDefaults(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.BlockSize != DefaultBlockSize || c.NumBlocks != DefaultNumBlocks || c.FrameSize != DefaultFrameSize ||
		c.BlockTimeout != DefaultBlockTimeout || c.PollTimeout != DefaultPollTimeout || c.BatchSize != DefaultBatchSize {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if ring := c.BlockSize * c.NumBlocks; ring > 8<<20 {
		t.Fatalf("default ring takes %d bytes per socket", ring)
	}
}

func TestConfigInvalid(t *testing.T) {
	page := os.Getpagesize()
	bad := map[string]Config{
		"block not page multiple": {BlockSize: page + 1},
		"negative block":          {BlockSize: -page},
		"one block":               {NumBlocks: 1},
		"negative blocks":         {NumBlocks: -3},
		"ring too large":          {BlockSize: 1 << 20, NumBlocks: 2048},
		"frame unaligned":         {FrameSize: 2050},
		"frame too small":         {FrameSize: 64},
		"frame above block":       {BlockSize: page, FrameSize: 2 * page},
		"timeout sub-ms":          {BlockTimeout: 1500 * time.Microsecond},
		"timeout negative":        {BlockTimeout: -time.Millisecond},
		"timeout huge":            {BlockTimeout: time.Hour},
		"negative batch":          {BatchSize: -1},
		"negative snap":           {SnapLen: -1},
		"filter too long":         {Filter: make([]SockFilter, MaxFilterLen+1)},
	}
	for name, c := range bad {
		if _, err := c.withDefaults(); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("%s: got %v, want steer.ErrConfig", name, err)
		}
	}
	// A small block gets a frame size that fits it.
	if c, err := (Config{BlockSize: page}).withDefaults(); err != nil || c.FrameSize > page {
		t.Errorf("small block: %+v, %v", c, err)
	}
}

func TestFanoutValidate(t *testing.T) {
	if err := validateFanout(4, FanoutHash, FanoutFlagDefrag|FanoutFlagRollover); err != nil {
		t.Errorf("valid fanout rejected: %v", err)
	}
	for name, err := range map[string]error{
		"rollover+flag": validateFanout(2, FanoutRollover, FanoutFlagRollover),
		"unknown mode":  validateFanout(2, FanoutMode(6), 0),
		"unknown flag":  validateFanout(2, FanoutHash, 0x0100),
		"uniqueid flag": validateFanout(2, FanoutHash, fanoutFlagUniqueID),
		"zero sockets":  validateFanout(0, FanoutHash, 0),
		"too many":      validateFanout(maxFanoutMembers+1, FanoutHash, 0),
	} {
		if !errors.Is(err, steer.ErrConfig) {
			t.Errorf("%s: got %v, want steer.ErrConfig", name, err)
		}
	}
	if FanoutHash.String() != "hash" || FanoutMode(9).String() != "FanoutMode(9)" {
		t.Errorf("mode names: %q %q", FanoutHash, FanoutMode(9))
	}
}

func TestErrClosedIsNetErrClosed(t *testing.T) {
	if !errors.Is(ErrClosed, net.ErrClosed) {
		t.Fatal("ErrClosed does not wrap net.ErrClosed")
	}
}

func TestStatsAdd(t *testing.T) {
	a := Stats{Packets: 1, Drops: 2, FreezeQueueCount: 3, Delivered: 4, Blocks: 5}
	if got := a.Add(a); got != (Stats{2, 4, 6, 8, 10}) {
		t.Fatalf("Add: %+v", got)
	}
}
