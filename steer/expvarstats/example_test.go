package expvarstats_test

import (
	"context"
	"encoding/json"
	"expvar"
	"fmt"
	"log"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/expvarstats"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// Example publishes a dispatcher's stats as the expvar "steer", steers the
// sample capture through it, and reads the variable as /debug/vars would
// serve it.
func Example() {
	d, err := steer.New(steer.Config{Workers: 2}, func(*steer.Packet) {})
	if err != nil {
		log.Fatal(err)
	}
	unpublish, err := expvarstats.Publish("steer", d)
	if err != nil {
		log.Fatal(err)
	}
	defer unpublish()

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

	var stats struct {
		Frames      uint64
		Workstreams []struct{ Worker int }
	}
	if err := json.Unmarshal([]byte(expvar.Get("steer").String()), &stats); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d frames over %d workstreams\n", stats.Frames, len(stats.Workstreams))
	// Output: 4623 frames over 2 workstreams
}
