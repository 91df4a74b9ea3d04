//go:build race

package main

// raceEnabled: the race detector slows every request by milliseconds that
// a wall-clock law's slope would take in.
const raceEnabled = true
