package affinity

import (
	"errors"
	"testing"
)

func TestPinAndReadBack(t *testing.T) {
	cpus, err := Allowed()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("Allowed() = %v, %v", cpus, err)
	}
	if !Supported() {
		if err := Pin(cpus[0]); !errors.Is(err, ErrNotSupported) {
			t.Fatalf("Pin on unsupported system: %v", err)
		}
		return
	}
	want := cpus[len(cpus)-1]
	done := make(chan error)
	go func() {
		// The goroutine exits still locked, so Go discards the pinned thread.
		if err := Pin(want); err != nil {
			done <- err
			return
		}
		got, err := Current()
		if err != nil {
			done <- err
			return
		}
		if len(got) != 1 || got[0] != want {
			done <- errors.New("affinity not applied")
			return
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
