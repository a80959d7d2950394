// Package capture holds the habits the capture commands (examples/pcapsteer
// and examples/livesteer) take from tcpdump, so that both behave alike:
//
//   - the capture filter, as trailing arguments, -f EXPR or -F FILE
//     (FilterFlags; compiled by package steer/filter);
//   - -c N, stop after N frames (Limit, a source wrapper shared by every
//     source of a run);
//   - -w FILE, write what was steered as pcap, into one file or one file per
//     worker with a pattern such as out-%d.pcap (Dump, written from each
//     worker's own state);
//   - -version (Version);
//   - -json, the report as one JSON document with stable field names
//     (Report, built from steer.Stats).
//
// And the flags and counts of the library's own hashing, alike in both:
//
//   - -tunnels, -vxlan-ports, -hashtypes, -udp4tuple and -hash, what the
//     flowid is computed from (HashFlags, checked as package steer checks
//     a HashConfig, refusals being usage errors);
//   - frames by encapsulation, counted in each worker without a lock
//     (EncapCounter, EncapTally), merged, printed as a table and put in the
//     JSON report (EncapCounts), with the one-line hint of a run that hashed
//     tunnelled frames by their outer headers.
//
// Package internal/synth builds frames in every encapsulation for the
// tests.
package capture
