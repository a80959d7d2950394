//go:build linux

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMetrics runs livesteer with -metrics on a loopback address and
// scrapes /metrics while it captures: the frames counted there are the
// frames sent, and no more than the final report counts.
func TestMetrics(t *testing.T) {
	p, conf := trafficPair(t)
	var out, errOut syncBuffer
	o := options{iface: p.A.Link, fanout: "none", workers: 2, policy: "rss", key: "random",
		duration: 3 * time.Second, interval: time.Hour, enter: p.A.Do, metrics: "127.0.0.1:0"}
	errc := make(chan error, 1)
	go func() { errc <- run(context.Background(), o, &out, &errOut) }()
	addr := regexp.MustCompile(`metrics at (http://\S+)`)
	var url string
	for deadline := time.Now().Add(5 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := addr.FindStringSubmatch(errOut.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("no metrics address announced:\n%s", errOut.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if b, err := p.B.Exec(ctx, "trafgen", "--dev", p.B.Link, "--conf", conf, "--num", "2000",
		"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"); err != nil {
		t.Errorf("trafgen: %v: %s", err, b)
	}
	cancel()
	time.Sleep(300 * time.Millisecond) // let the workers finish the burst
	scraped := scrapeCounter(t, url, "rps_frames_total")
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop after its duration")
	}
	m := regexp.MustCompile(`Frames: (\d+) in`).FindAllStringSubmatch(out.String(), -1)
	if m == nil {
		t.Fatalf("no final report:\n%s", out.String())
	}
	final, _ := strconv.ParseFloat(m[len(m)-1][1], 64)
	if scraped < 2000 || scraped > final {
		t.Errorf("rps_frames_total %v while capturing; want the 2000 frames sent, at most the final %v", scraped, final)
	}
	if _, err := http.Get(url); err == nil {
		t.Error("the metrics endpoint still answers after livesteer returned")
	}
}

// scrapeCounter fetches url and returns the value of the unlabelled
// series name.
func scrapeCounter(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return v
		}
	}
	t.Fatalf("no %s in the scrape", name)
	return 0
}
