package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rpsgo/rps/steer"
)

// Path is where Serve serves the metrics.
const Path = "/metrics"

// shutdownGrace is how long Serve lets scrapes under way finish once its
// ctx has ended.
const shutdownGrace = 2 * time.Second

// Handler returns an http.Handler that serves d's metrics in the
// Prometheus exposition formats, with the Go runtime's (go_*) and the
// process's (process_*) beside them, from a registry of its own: nothing
// is registered with the default registry, so a program may make several.
// A collection error is counted in promhttp_metric_handler_errors_total
// and the rest is served. The options are NewCollector's, and so are the
// errors.
func Handler(d *steer.Dispatcher, opts ...Option) (http.Handler, error) {
	c, err := NewCollector(d, opts...)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	for _, col := range []prometheus.Collector{c, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("metrics: registering a collector: %w", err)
		}
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
	}), nil
}

// Serve serves Handler(d, opts...) at Path on ln until ctx ends, then lets
// scrapes under way finish (for a moment at most), closes ln and returns
// nil. It returns an error when the handler cannot be made (ln is closed
// then too) or when serving fails. Other paths answer 404.
//
// A program listens first, so that a bad address is reported at once and
// the address in use is known even for port 0:
//
//	ln, err := net.Listen("tcp", addr)
//	if err != nil { ... }
//	go func() { errc <- metrics.Serve(ctx, ln, d) }()
func Serve(ctx context.Context, ln net.Listener, d *steer.Dispatcher, opts ...Option) error {
	h, err := Handler(d, opts...)
	if err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("metrics: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("metrics: stopping the server on %s: %w", ln.Addr(), err)
	}
	return nil
}
