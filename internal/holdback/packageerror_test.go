package holdback

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestPackageError: each kind of SetTable error becomes the calling
// package's.
func TestPackageError(t *testing.T) {
	errConfig, closed, kernel := errors.New("pkg: config"), errors.New("pkg: closed"), errors.New("kernel")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	if err := PackageError(live, nil, "pkg", errConfig, closed); err != nil {
		t.Errorf("nil: %v", err)
	}
	if err := PackageError(live, fmt.Errorf("%w: bad", ErrTable), "pkg", errConfig, closed); !errors.Is(err, errConfig) || !errors.Is(err, ErrTable) {
		t.Errorf("a refused table: %v", err)
	}
	if err := PackageError(live, errClosed, "pkg", errConfig, closed); err != closed {
		t.Errorf("closed: %v", err)
	}
	if err := PackageError(ctx, fmt.Errorf("waiting: %w", ctx.Err()), "pkg", errConfig, closed); !errors.Is(err, context.Canceled) || err.Error() != "pkg: waiting: context canceled" {
		t.Errorf("ctx's end: %v", err)
	}
	if err := PackageError(live, kernel, "pkg", errConfig, closed); err != kernel {
		t.Errorf("the kernel's error: %v", err)
	}
}
