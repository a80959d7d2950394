//go:build !linux

package rfstable

// hugeSlice returns n zero values of T. Only Linux gets huge-page advice.
func hugeSlice[T any](n int) []T { return make([]T, n) }
