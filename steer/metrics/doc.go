// Package metrics publishes a [steer.Dispatcher]'s statistics to
// Prometheus: a [prometheus.Collector] over [steer.Dispatcher.Stats],
// including the counters live sources keep of their own (an AF_PACKET
// ring's PACKET_STATISTICS), and an HTTP handler and server for /metrics.
// It is a package of its own so that package steer imports neither net/http
// nor the Prometheus client: only a program that imports metrics gets them.
//
// # Serving
//
//	ln, err := net.Listen("tcp", addr) // "127.0.0.1:0" picks a free port: see ln.Addr()
//	if err != nil { ... }
//	go metrics.Serve(ctx, ln, d) // /metrics until ctx ends
//
// [Handler] is the same endpoint for a program's own mux, and
// [NewCollector] the collector alone, for a registry the program keeps
// (reg.MustRegister(c)). Neither touches the default registry.
//
// # Metrics
//
// Every Collect reads d.Stats() once, so one scrape is one snapshot.
// Counters read while traffic flows are each exact but read one after
// another; once d is closed they add up: rps_frames_total equals the sum
// of handled, dropped and panicked over the workers. Every counter only
// grows, and a closed dispatcher keeps reporting its final counts.
// The names, with the default namespace "rps" ([WithNamespace]):
//
//	rps_frames_total                                  counter  frames handed to the dispatcher (Stats.Frames)
//	rps_worker_handled_total{worker}                  counter  netstat -Q Handled
//	rps_worker_queued_total{worker}                   counter  netstat -Q Queued
//	rps_worker_inline_dispatched_total{worker,mode}   counter  mode="direct": Disp'd, mode="hybrid": HDisp'd
//	rps_worker_dropped_total{worker,reason}           counter  reason="queue" (QDrops), "stall", "flow_limit", "redispatch", "close"
//	rps_worker_panicked_total{worker}                 counter  frames whose handler panicked
//	rps_worker_queue_length{worker}                   gauge    netstat -Q Len
//	rps_worker_queue_watermark{worker}                gauge    netstat -Q WMark
//	rps_worker_info{worker,cpu}                       gauge    1; cpu is the pinned CPU, empty when unpinned
//	rps_classified_total{reason}                      counter  Stats.Reasons, reason as steer.Reason prints it
//	rps_callback_panics_total{callback}               counter  Stats.CallbackPanics: Tick, MoveOut, MoveIn, Close, Trace, ...;
//	                                                           a series appears once its callback has panicked
//	rps_bucket_moves_total                            counter  Stats.BucketMoves
//	rps_flow_moves_total                              counter  Stats.FlowMoves (RFS)
//	rps_source_received_total{source}                 counter  SourceStats.Received (tp_packets)
//	rps_source_dropped_total{source}                  counter  SourceStats.Dropped (tp_drops)
//	rps_source_filtered_total{source}                 counter  SourceStats.Filtered (a capture filter in user space)
//	rps_source_kernel_total{source,counter}           counter  SourceStats.Kernel, one series per counter, under the
//	                                                           kernel's name (counter="tp_freeze_q_cnt", "rx_ring_full", ...)
//
// worker is the workstream id (netstat -Q's WSID), one series per worker
// rather than one metric per worker, so that sum by (reason)
// (rate(rps_worker_dropped_total[1m])) is the dispatcher's drop rate and
// max(rps_worker_queue_length) its deepest queue. Every reason, mode and
// worker is reported from the first scrape, zeros included, so that rates
// start at once.
//
// source is the source's name (steer.SourceStats.Name, such as
// "afpacket:eth0"). The sockets of a fanout group share their interface's
// name and are summed. A source whose counters cannot be read at one scrape
// keeps its last totals, so that a sum never goes down.
//
// [WithConstLabels] adds fixed labels to every metric, to tell the
// dispatchers of one process apart; Prometheus wants one set of label
// names per metric name, so in one registry either every collector of a
// namespace has the same constant label names, or each has a namespace of
// its own.
package metrics
