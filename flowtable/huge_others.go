//go:build !linux

package flowtable

// adviseHuge does nothing: only Linux gets huge-page advice.
func adviseHuge[T any](s []T) {}
