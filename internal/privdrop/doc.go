// Package privdrop drops a process's privileges once it has opened what
// needed them, as tcpdump -Z does: a capture opens its sockets and loads
// its programs as root, then parses untrusted frames as a user who can do
// nothing else.
//
// [Drop] makes every thread of the process the target user: its
// supplementary groups, its group and its user ID (real, effective and
// saved). When the user IDs leave 0 the kernel clears every capability
// of the thread, permitted, effective and ambient (capabilities(7), "Effect
// of user ID changes on capabilities"), so nothing the process holds any
// more lets it open a socket, load a program or change a device. Before
// that, where it can reach every thread (not in a binary linked with cgo,
// see syscall.AllThreadsSyscall), it also empties the capability bounding
// set and sets no_new_privs, so that no program it executes could regain
// them. Go's syscall.Setgroups, Setresgid and Setresuid change every
// thread of the process since Go 1.16, with or without cgo.
//
// What was opened stays usable: descriptors keep the rights they were
// opened with. A capture can still read its rings, read and update the
// maps of its programs (on Linux 5.19 and later: before, with
// kernel.unprivileged_bpf_disabled set, every bpf(2) command needs
// CAP_BPF), detach its programs by closing their links, and close
// everything. It cannot open anything new that needs a privilege.
//
// [Check] reads every thread's credentials from /proc, so that a caller
// (and the tests) can see that the drop reached them all.
package privdrop
