package placement

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// bruteExpected returns the expected cost and memory of checkpoint set q
// (a bit mask holding version 0) by direct evaluation.
func bruteExpected(chain []ChainVersion, mask int) (float64, int64) {
	uniform := true
	for _, c := range chain {
		if c.Weight > 0 {
			uniform = false
		}
	}
	var cost, total float64
	var mem int64
	for i := range chain {
		if mask&(1<<i) != 0 {
			mem += chain[i].Memory
		}
		best := math.Inf(1)
		for q := 0; q <= i; q++ {
			if mask&(1<<q) == 0 {
				continue
			}
			c := chain[q].Seed
			for j := q + 1; j <= i; j++ {
				c += chain[j].Apply
			}
			best = min(best, c)
		}
		w := chain[i].Weight
		if uniform {
			w = 1
		}
		cost += w * best
		total += w
	}
	return cost / total, mem
}

func randChain(rng *rand.Rand, n int) []ChainVersion {
	chain := make([]ChainVersion, n)
	weighted := rng.IntN(2) == 0
	for i := range chain {
		chain[i] = ChainVersion{
			Apply:  float64(rng.IntN(20)),
			Seed:   float64(rng.IntN(60)),
			Memory: int64(1 + rng.IntN(10)),
		}
		if weighted {
			chain[i].Weight = float64(rng.IntN(4))
		}
	}
	return chain
}

// TestPlaceAgainstBruteForce checks Place and Pareto on random small chains
// against every checkpoint set.
func TestPlaceAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const eps = 1e-9
	for trial := range 300 {
		n := 1 + rng.IntN(10)
		chain := randChain(rng, n)
		front, err := Pareto(chain)
		if err != nil {
			t.Fatal(err)
		}
		// Every front point is what it claims, and no set beats it.
		for _, p := range front {
			mask := 0
			for _, q := range p.Checkpoints {
				mask |= 1 << q
			}
			if mask&1 == 0 {
				t.Fatalf("trial %d: placement %v lacks the first version", trial, p.Checkpoints)
			}
			cost, mem := bruteExpected(chain, mask)
			if math.Abs(cost-p.Expected) > eps || mem != p.Memory {
				t.Fatalf("trial %d: placement %v claims (%d, %g), is (%d, %g)", trial, p.Checkpoints, p.Memory, p.Expected, mem, cost)
			}
		}
		for mask := 1; mask < 1<<n; mask += 2 {
			cost, mem := bruteExpected(chain, mask)
			// Some front point is at least as good in both.
			ok := false
			for _, p := range front {
				if p.Memory <= mem && p.Expected <= cost+eps {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("trial %d: set %b (%d, %g) beats the front %+v", trial, mask, mem, cost, front)
			}
		}
		// Place under random budgets equals the brute-force optimum.
		for range 5 {
			budget := int64(rng.IntN(60))
			best, found := math.Inf(1), false
			for mask := 1; mask < 1<<n; mask += 2 {
				if cost, mem := bruteExpected(chain, mask); mem <= budget {
					best, found = min(best, cost), true
				}
			}
			p, err := Place(chain, budget)
			if !found {
				if err == nil {
					t.Fatalf("trial %d: budget %d fits nothing, Place returned %+v", trial, budget, p)
				}
				continue
			}
			if err != nil {
				t.Fatalf("trial %d: budget %d: %v", trial, budget, err)
			}
			if math.Abs(p.Expected-best) > eps || p.Memory > budget {
				t.Fatalf("trial %d: budget %d: Place %+v, brute force %g", trial, budget, p, best)
			}
		}
	}
}

// The nearest checkpoint is not always the cheapest: a far one with a
// cheap seed can win.
func TestPlaceFarCheckpoint(t *testing.T) {
	chain := []ChainVersion{
		{Seed: 1, Memory: 1},
		{Apply: 1, Seed: 100, Memory: 1},
		{Apply: 1, Seed: 100, Memory: 1},
	}
	p, err := Place(chain, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Checkpoints) != 1 || p.Expected != (1+2+3)/3.0 {
		t.Fatalf("placement %+v: costly checkpoints should not be kept", p)
	}
}

func TestPlaceBadInput(t *testing.T) {
	if _, err := Pareto(nil); err == nil {
		t.Error("empty chain")
	}
	if _, err := Pareto([]ChainVersion{{Apply: -1}}); err == nil {
		t.Error("negative apply cost")
	}
	if _, err := Pareto([]ChainVersion{{Seed: math.NaN()}}); err == nil {
		t.Error("NaN seed cost")
	}
	if _, err := Place([]ChainVersion{{Memory: 5}}, 4); err == nil {
		t.Error("budget below the first checkpoint")
	}
}

// TestParetoDeterministic: where placements tie, Pareto returns the same one
// on every call.
func TestParetoDeterministic(t *testing.T) {
	chain := make([]ChainVersion, 24)
	for i := range chain {
		chain[i] = ChainVersion{Seed: 1, Apply: 1, Memory: 100}
	}
	first, err := Pareto(chain)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := Pareto(chain)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("Pareto of one chain differs between calls:\n%v\n%v", first, again)
		}
	}
}
