//go:build !race

package livesock

const raceEnabled = false
