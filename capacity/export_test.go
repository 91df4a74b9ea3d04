package capacity

// TwinCapacity is the capacity the twin of these laws' coefficients places
// for a use case (the least of its SLOs' limits): for tests outside the
// package that hold the twin against a law they know whole
// (internal/scripted, which imports this package).
func TwinCapacity(u UseCase, ttft, itl []float64, kv float64, inSteps bool) float64 {
	tw := twin{output: float64(u.OutputTokens), input: float64(u.InputTokens), kv: kv, inSteps: inSteps}.with(ttft, itl)
	cs := cells{tw: tw}
	least := float64(maxTruthSearch + 1)
	for _, s := range u.SLOs() {
		least = min(least, cs.limit(s, maxTruthSearch))
	}
	return least
}

// maxTruthSearch is how far TwinCapacity searches: scripted.Law.Truth's.
const maxTruthSearch = 1024
