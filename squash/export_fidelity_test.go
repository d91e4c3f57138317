package squash

import "testing"

// What the fidelity benchmark through the rewrite pipeline
// (fidelity_pipeline_test.go, package squash_test: it imports rewrite,
// which imports squash) takes from the benchmark's own files.

type (
	FidelityCase    = fidelityCase
	FidelityOutcome = fidelityOutcome
)

// CorpusFidelityCases is corpusFidelityCases.
func CorpusFidelityCases(t testing.TB) ([]FidelityCase, int) { return corpusFidelityCases(t) }

// MeasureForwarded is measureForwarded.
func MeasureForwarded(cases []FidelityCase, sq *Squasher, forward func(*FidelityCase) string) []FidelityOutcome {
	return measureForwarded(cases, sq, forward)
}

// CheckFidelityOutcomes is checkFidelityOutcomes.
func CheckFidelityOutcomes(t *testing.T, outs []FidelityOutcome) { checkFidelityOutcomes(t, outs) }

// FidelityAll sums all of outs: the share of used tokens kept, of those
// kept or one retrieval away, and of bytes saved.
func FidelityAll(outs []FidelityOutcome) (keptPct, recoverablePct, savedPct float64) {
	all := sumFidelity(outs, func(fidelityOutcome) bool { return true })
	return all.KeptPct(), all.RecoverablePct(), all.SavedPct()
}

// FidelityTables prints outs' figures by row and their worst offenders,
// as TestCorpusFidelity does (-fidelity.markdown, -fidelity.worst,
// -fidelity.only).
func FidelityTables(outs []FidelityOutcome) string { return fidelityTables(outs) }

// FidelityTrace is fidelityTrace, and FidelityTraceCases its cases of
// any size.
const FidelityTrace = fidelityTrace

func FidelityTraceCases(t testing.TB) []FidelityCase {
	samples, err := fidelitySamples("t.json", []byte(fidelityTrace), 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := make([]FidelityCase, len(samples))
	for i, s := range samples {
		cases[i] = newFidelityCase(s)
	}
	return cases
}
