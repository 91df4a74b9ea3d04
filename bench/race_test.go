//go:build race

package bench

// raceEnabled: the race detector slows the client by milliseconds that a
// sweep of the wall-clock simulator reads as the server's.
const raceEnabled = true
