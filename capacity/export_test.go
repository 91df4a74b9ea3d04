package capacity

// TwinCapacity is the capacity the twin of these laws' coefficients places
// for a use case (the least of its SLOs' limits): for tests outside the
// package that hold the twin against a law they know whole
// (internal/scripted, which imports this package). saturate is the
// levelling's shape (levelColumn's r; 0: ln b), where itl has a δe.
func TwinCapacity(u UseCase, ttft, itl []float64, kv float64, inSteps bool, saturate float64) float64 {
	tw := u.shape()
	tw.kv, tw.inSteps, tw.saturate = kv, inSteps, saturate
	cs := cells{tw: tw.with(ttft, itl)}
	least := float64(maxTruthSearch + 1)
	for _, s := range u.SLOs() {
		least = min(least, cs.limit(s, maxTruthSearch))
	}
	return least
}

// maxTruthSearch is how far TwinCapacity searches: scripted.Law.Truth's.
const maxTruthSearch = 1024
