package gopacketsrc

import (
	"errors"
	"reflect"
	"strings"
)

// What the adapter knows of gopacket's own packet sources without
// importing them (gopacket/pcap, gopacket/pfring and gopacket/afpacket
// need cgo): their timeout errors and the AncillaryVLAN type, recognised by
// package path, name and shape. Package paths are matched by their tail, so
// that forks of gopacket are recognised as well.

// afpacketTimeout is the text of gopacket/afpacket's ErrTimeout, an
// errors.New value with no type of its own.
const afpacketTimeout = "packet poll timeout expired"

// isTimeout is the default test for an error by which a packet source says
// its read timeout expired with no packet.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return true // net.Error's convention, and os.ErrDeadlineExceeded
	}
	rt := reflect.TypeOf(err)
	switch {
	case isNamed(rt, "gopacket/pcap", "NextError", reflect.Int32):
		// pcap.NextErrorTimeoutExpired, pcap_next_ex's 0.
		return reflect.ValueOf(err).Int() == 0
	case isNamed(rt, "gopacket/pfring", "NextResult", reflect.Int32):
		// pfring.NextNoPacketNonblocking.
		return reflect.ValueOf(err).Int() == 0
	}
	return err.Error() == afpacketTimeout
}

// isNamed reports whether t is the type name, of kind k, declared in a
// package whose path ends with pkg.
func isNamed(t reflect.Type, pkg, name string, k reflect.Kind) bool {
	return t != nil && t.Kind() == k && t.Name() == name &&
		(t.PkgPath() == pkg || strings.HasSuffix(t.PkgPath(), "/"+pkg))
}

// vlanDecoder finds gopacket/afpacket's AncillaryVLAN (a struct with one
// int field, VLAN: the VLAN id of tp_vlan_tci, which the kernel stripped
// from the frame) in a packet's ancillary data.
type vlanDecoder struct {
	t reflect.Type // the AncillaryVLAN type, once seen
}

// find returns the VLAN id of the first AncillaryVLAN in anc. bad is set
// when its value is not a VLAN id (outside 0..4095); it is then ignored.
func (d *vlanDecoder) find(anc []any) (vlan uint16, ok, bad bool) {
	for _, x := range anc {
		t := reflect.TypeOf(x)
		if t != d.t {
			if !isAncillaryVLAN(t) {
				continue
			}
			d.t = t
		}
		v := reflect.ValueOf(x).Field(0).Int()
		if v < 0 || v > 0xfff {
			return 0, false, true
		}
		return uint16(v), true, false
	}
	return 0, false, false
}

func isAncillaryVLAN(t reflect.Type) bool {
	return isNamed(t, "gopacket/afpacket", "AncillaryVLAN", reflect.Struct) &&
		t.NumField() == 1 && t.Field(0).Name == "VLAN" && t.Field(0).Type.Kind() == reflect.Int
}
