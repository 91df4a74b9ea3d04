//go:build !race

package capacity_test

const raceEnabled = false
