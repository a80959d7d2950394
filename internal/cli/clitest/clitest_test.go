package clitest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli"
)

// demo is the command the tests run: it prints its arguments, then reads
// standard input to the end, or until a signal, and exits with status 3.
func demo() {
	ctx, stop := cli.NotifyContext(context.Background())
	defer stop()
	fmt.Println(strings.Join(os.Args, " "))
	if len(os.Args) > 1 && os.Args[1] == "read" {
		r, err := cli.Open(ctx, "-")
		if err != nil {
			os.Exit(1)
		}
		n := 0
		buf := make([]byte, 4096)
		for {
			k, err := r.Read(buf)
			n += k
			if err != nil {
				fmt.Printf("read %d bytes: %v\n", n, err)
				break
			}
		}
	}
	os.Exit(3)
}

func TestMain(m *testing.M) {
	RunMain("CLITEST_DEMO", "demo", demo)
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	res := Run(t, "CLITEST_DEMO", "-x", "two words")
	if res.Status != 3 || res.Stdout != "demo -x two words\n" || res.Stderr != "" {
		t.Errorf("got %+v", res)
	}
}
