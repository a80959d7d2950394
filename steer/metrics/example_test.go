package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/metrics"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// Example steers the sample capture through two workers, serves the
// dispatcher's metrics with Handler, and scrapes them as Prometheus would.
// (metrics.Serve(ctx, ln, d) serves the same at /metrics on a listener.)
func Example() {
	d, err := steer.New(steer.Config{Workers: 2}, func(*steer.Packet) {})
	if err != nil {
		log.Fatal(err)
	}
	r, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	if err := d.Run(context.Background(), r); err != nil {
		log.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		log.Fatal(err)
	}

	h, err := metrics.Handler(d)
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + metrics.Path)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "rps_frames_total") || strings.HasPrefix(line, "rps_classified_total") && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// rps_classified_total{reason="bad-ihl"} 2
	// rps_classified_total{reason="non-ip"} 23
	// rps_classified_total{reason="ok"} 4594
	// rps_classified_total{reason="short-ethernet"} 1
	// rps_classified_total{reason="short-ipv6"} 1
	// rps_classified_total{reason="short-transport"} 1
	// rps_classified_total{reason="too-many-vlans"} 1
	// rps_frames_total 4623
}

// ExampleNewCollector registers the collector with a registry the program
// keeps, and lists the metrics it reports with their types. The source
// metrics appear once a source with counters of its own (an AF_PACKET ring)
// is read.
func ExampleNewCollector() {
	d, err := steer.New(steer.Config{Workers: 2}, func(*steer.Packet) {})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close(context.Background())
	c, err := metrics.NewCollector(d)
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range fams {
		fmt.Printf("%-34s %s\n", f.GetName(), strings.ToLower(f.GetType().String()))
	}
	// Output:
	// rps_bucket_moves_total             counter
	// rps_classified_total               counter
	// rps_flow_moves_total               counter
	// rps_frames_total                   counter
	// rps_worker_dropped_total           counter
	// rps_worker_handled_total           counter
	// rps_worker_info                    gauge
	// rps_worker_inline_dispatched_total counter
	// rps_worker_panicked_total          counter
	// rps_worker_queue_length            gauge
	// rps_worker_queue_watermark         gauge
	// rps_worker_queued_total            counter
}
