//go:build !race

package alerts

const raceEnabled = false
