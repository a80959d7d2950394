//go:build linux

package afpacket

import (
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// virtio_net_hdr flags (include/uapi/linux/virtio_net.h).
const vnetNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM: the checksum is left to offload

// openTap creates a tap device named name in the calling thread's
// network namespace, with virtio-net headers on what is written to it,
// and returns its file.
func openTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "tap"), nil
}

// TestChecksumStatusMapping: each tp_status gives its Checksum, the
// offload's word first when both are set.
func TestChecksumStatusMapping(t *testing.T) {
	for _, tc := range []struct {
		status uint32
		want   steer.Checksum
	}{
		{unix.TP_STATUS_USER, steer.ChecksumUnknown},
		{unix.TP_STATUS_USER | unix.TP_STATUS_CSUM_VALID, steer.ChecksumGood},
		{unix.TP_STATUS_USER | unix.TP_STATUS_CSUMNOTREADY | unix.TP_STATUS_VLAN_VALID, steer.ChecksumPartial},
		{unix.TP_STATUS_CSUMNOTREADY | unix.TP_STATUS_CSUM_VALID, steer.ChecksumPartial},
	} {
		if got := checksumStatus(tc.status); got != tc.want {
			t.Errorf("status %#x: %v, want %v", tc.status, got, tc.want)
		}
	}
}

// TestChecksumStatus: the ring's checksum status reaches Frame.Checksum.
// Frames written to a tap device come in with what their virtio-net
// header says, as a guest's do: NEEDS_CSUM gives the kernel
// CHECKSUM_PARTIAL and the ring TP_STATUS_CSUMNOTREADY (ChecksumPartial),
// no flag nothing (ChecksumUnknown). (TP_STATUS_CSUM_VALID needs a NIC
// that verifies checksums, or virtio-net's driver: a tap's writer, a
// veth peer and loopback cannot give CHECKSUM_UNNECESSARY, which
// TestChecksumStatusMapping covers.)
func TestChecksumStatus(t *testing.T) {
	p := netns.New(t, netns.Options{KeepOffloads: true})
	const link = "rpstap0"
	var tap *os.File
	err := p.A.Do(func() (err error) {
		tap, err = openTap(link)
		return err
	})
	if err != nil {
		netns.SkipOrFatal(t, "no tap device: "+err.Error())
	}
	defer tap.Close()
	if out, err := p.A.Exec(context.Background(), "ip", "link", "set", link, "up"); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	src := openIn(t, p.A, link, Config{BlockTimeout: 2 * time.Millisecond})
	got := map[byte]map[steer.Checksum]int{}
	c := collect(src, func(f *steer.Frame) {
		if len(f.Data) >= 43 && binary.BigEndian.Uint16(f.Data[12:]) == 0x0800 && f.Data[23] == 17 {
			kind := f.Data[42] // the payload's first byte: the header's flags
			if got[kind] == nil {
				got[kind] = map[steer.Checksum]int{}
			}
			got[kind][f.Checksum]++
		}
	})
	const n = 20
	for _, flags := range []byte{0, vnetNeedsCsum} {
		for i := 0; i < n; i++ {
			// A virtio_net_hdr (flags, gso_type, hdr_len, gso_size,
			// csum_start, csum_offset; native order), then UDP over IPv4.
			hdr := make([]byte, 10)
			hdr[0] = flags
			if flags == vnetNeedsCsum {
				binary.NativeEndian.PutUint16(hdr[6:], 14+20) // the UDP header
				binary.NativeEndian.PutUint16(hdr[8:], 6)     // its checksum field
			}
			f := []byte{0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00,
				0x45, 0, 0, 30, 0, 1, 0, 0, 64, 17, 0, 0, 10, 9, 0, 1, 10, 9, 0, 2,
				0x30, 0x39, 0, 9, 0, 10, 0, 0, flags, byte(i)}
			if _, err := tap.Write(append(hdr, f...)); err != nil {
				t.Fatalf("writing to the tap: %v", err)
			}
		}
	}
	want := map[byte]steer.Checksum{0: steer.ChecksumUnknown, vnetNeedsCsum: steer.ChecksumPartial}
	deadline := time.Now().Add(5 * time.Second)
	done := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for k, w := range want {
			if got[k][w] < n {
				return false
			}
		}
		return true
	}
	for !done() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c.Stop(t)
	for k, w := range want {
		if got[k][w] != n || len(got[k]) != 1 {
			t.Errorf("virtio-net flags %d: %v, want %d %v", k, got[k], n, w)
		}
	}
}
