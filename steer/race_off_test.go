//go:build !race

package steer

const raceEnabled = false
