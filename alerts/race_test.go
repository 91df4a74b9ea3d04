//go:build race

package alerts

const raceEnabled = true
