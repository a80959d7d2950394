package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/metrics"
)

// TestHandlerScrape scrapes Handler over HTTP, as Prometheus does, and
// checks the dispatcher's series against Stats, the runtime's series
// beside them, and the whole exposition against client_golang's lint.
func TestHandlerScrape(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 2}, func(*steer.Packet) {})
	runSample(t, d, "afpacket:eth0", steer.SourceStats{Received: 4700, Dropped: 77, Kernel: freezes(2)})
	moveBuckets(t, d)
	closeDispatcher(t, d)
	h, err := metrics.Handler(d)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	body, err := fetch(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	fams := parse(t, body)
	compare(t, series(fams, "rps_"), expected(d.Stats(), "rps", nil))
	if len(series(fams, "go_goroutines")) != 1 {
		t.Error("no go_goroutines: the Go runtime's metrics are not served")
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestServe serves on a loopback port of its own, scrapes it, checks the
// values against Stats, and checks that Serve stops with its context and
// closes the listener.
func TestServe(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 3}, func(*steer.Packet) {})
	runSample(t, d, "afpacket:lo", steer.SourceStats{Received: 4623})
	closeDispatcher(t, d)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- metrics.Serve(ctx, ln, d) }()

	base := "http://" + ln.Addr().String()
	compare(t, series(scrape(t, base+metrics.Path), "rps_"), expected(d.Stats(), "rps", nil))
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / = %s, want 404", resp.Status)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after its context ended = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after Serve returned")
	}
}

// TestServeErrors checks that Serve reports what stops it from serving:
// bad options (closing the listener it was given) and a failing listener.
func TestServeErrors(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 1}, func(*steer.Packet) {})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = metrics.Serve(context.Background(), ln, d, metrics.WithNamespace("no-dashes"))
	if err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("Serve with a bad namespace = %v, want the namespace error", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Serve failed = %v, want the listener closed", err)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	done := make(chan error, 1)
	go func() { done <- metrics.Serve(context.Background(), ln, d) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "metrics: serving on") {
			t.Errorf("Serve on a closed listener = %v, want an error saying so", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve on a closed listener did not return")
	}
}

// TestScrapeWhileFramesFlow scrapes from two goroutines over HTTP, and
// collects directly from a third, while frames flow through four workers
// (run it with -race). Between one scrape and the next no counter may go
// down and no series may vanish; the frames must be seen to grow; and once
// the dispatcher is closed a last scrape is its Stats exactly.
func TestScrapeWhileFramesFlow(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 4}, func(*steer.Packet) {})
	src := &countedSource{Source: &steer.SliceSource{Frames: loadSample(t), Loops: -1},
		st: steer.SourceStats{Name: "afpacket:veth0"}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, src) }()
	counted := make(chan struct{})
	go func() { // the source's own counters grow too, and now and then cannot be read
		defer close(counted)
		for sent := uint64(64); ctx.Err() == nil; sent += 64 {
			src.set(steer.SourceStats{Name: "afpacket:veth0", Received: sent, Dropped: sent / 64}, sent%640 == 0)
			time.Sleep(time.Millisecond)
		}
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- metrics.Serve(sctx, ln, d) }()
	url := "http://" + ln.Addr().String() + metrics.Path
	c := newCollector(t, d)

	const scrapes = 25
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			var prev map[string]float64
			var counters map[string]bool
			for range scrapes {
				fams, err := gatherErr(c)
				if g > 0 {
					var body string
					if body, err = fetch(url); err == nil {
						fams, err = parseErr(body)
					}
				}
				if err != nil {
					t.Errorf("scraper %d: %v", g, err)
					return
				}
				if counters == nil {
					counters = counterNames(fams)
				}
				cur := series(fams, "rps_")
				for k, v := range prev {
					name, _, _ := strings.Cut(k, "{")
					switch now, ok := cur[k]; {
					case !ok:
						t.Errorf("scraper %d: %s vanished", g, k)
					case counters[name] && now < v:
						t.Errorf("scraper %d: counter %s went down from %v to %v", g, k, v, now)
					}
				}
				prev = cur
			}
			if prev[`rps_frames_total{}`] == 0 {
				t.Errorf("scraper %d: no frames seen", g)
			}
		})
	}
	first := scrape(t, url)
	wg.Wait()
	if series(scrape(t, url), "rps_")[`rps_frames_total{}`] <= series(first, "rps_")[`rps_frames_total{}`] {
		t.Error("rps_frames_total did not grow while frames flowed")
	}

	stop()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	<-counted
	src.set(steer.SourceStats{Name: "afpacket:veth0", Received: 1 << 40, Dropped: 1 << 30}, false)
	closeDispatcher(t, d)
	compare(t, series(scrape(t, url), "rps_"), expected(d.Stats(), "rps", nil))
	stopServe()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// scrape fetches url as Prometheus would, checks the answer is the text
// exposition format, and parses it.
func scrape(t testing.TB, url string) []*dto.MetricFamily {
	t.Helper()
	body, err := fetch(url)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, body)
}

// fetch GETs url and returns the body of a 200 answer in the text format.
func fetch(url string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return "", fmt.Errorf("GET %s: Content-Type %q, want the text format", url, ct)
	}
	return string(b), nil
}

// parse parses the text exposition format.
func parse(t testing.TB, body string) []*dto.MetricFamily {
	t.Helper()
	fams, err := parseErr(body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// parseErr is parse for a goroutine other than the test's.
func parseErr(body string) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	m, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing the scrape: %w\n%s", err, body)
	}
	fams := make([]*dto.MetricFamily, 0, len(m))
	for _, f := range m {
		fams = append(fams, f)
	}
	return fams, nil
}

// counterNames returns the names of the counter families.
func counterNames(fams []*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, f := range fams {
		if f.GetType() == dto.MetricType_COUNTER {
			out[f.GetName()] = true
		}
	}
	return out
}
