// Package pace sends UDP/IPv4 frames out of an interface at a rate it
// keeps, open loop: frame i is due at i/Rate from the first, and each
// sendmmsg(2) call on an AF_PACKET socket carries every frame due (up to
// a batch), so the offered rate holds on average however the calls fall,
// whatever the receiver does. With Burst the frames come in groups sent
// back to back, a group every Burst/Rate: bursts of 300 frames every
// millisecond are Rate 300000, Burst 300.
//
// It is the one paced sender of the module: the bench's live experiment
// runs it in a process of its own (the bench binary started again), and
// the live tests call Send in a namespace they created. trafgen was the
// sender once; its --rate is not kept (asked for 100 kpps it sent 930).
//
// The frames are broadcast at the Ethernet layer, so that no neighbour
// resolution is needed, from Spec.Src to Spec.Dst port 9, their UDP
// checksum zero; each frame's source address's last byte, IP id and
// source port are random (up to 2^24 4-tuples), its IP checksum right.
package pace
