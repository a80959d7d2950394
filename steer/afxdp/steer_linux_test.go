//go:build linux

package afxdp

import (
	"context"
	"errors"
	"testing"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// TestSteeringNamespace: outside the group's namespace the interface
// index names another interface, so NewSteering refuses, with a
// configuration error, and leaves the group free and no program behind.
// (steer/kgroup's tests check the Steering itself, over both families.)
func TestSteeringNamespace(t *testing.T) {
	p := netns.New(t, netns.Options{})
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	var g *Group
	if err := p.A.Do(func() (err error) {
		g, err = OpenGroup(p.A.Link, 2, Config{Host: HostTake, NumFrames: 64, RingSize: 64})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := NewSteering(d, g, kgroup.Options{}); !errors.Is(err, steer.ErrConfig) || !errors.Is(err, errOtherNetNS) {
		t.Errorf("NewSteering outside the namespace: %v", err)
	}
	if livetest.XDPAttached(t, p.A) {
		t.Fatal("a refused NewSteering left a program on the link")
	}
	var st *kgroup.Steering
	if err := p.A.Do(func() (err error) { st, err = NewSteering(d, g, kgroup.Options{}); return err }); err != nil {
		t.Fatalf("NewSteering in the namespace after a refusal: %v", err)
	}
	if a := g.Info().Attach; a != AttachNative {
		t.Errorf("attach %v after NewSteering, want native", a)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if a := g.Info().Attach; a != AttachNone {
		t.Errorf("attach %v after the Steering's Close, want none", a)
	}
}
