package main

import (
	"fmt"
	"math"
	"slices"
)

// summary is the spread of one figure over the repetitions of a
// configuration: how many, the smallest, the median and the largest.
//
// With n independent runs the interval [Min, Max] holds the true median
// with confidence 1-2^(1-n) (75% at 3 runs, 97% at 6), which is why the
// full run makes at least 6; benchstat reports the same order-statistic
// interval for such counts.
type summary struct {
	N             int
	Min, Med, Max float64
}

// summarize returns the summary of v (NaNs left out): the median of an
// even count is the mean of the two middle values.
func summarize(v []float64) summary {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return summary{}
	}
	slices.Sort(v)
	return summary{N: len(v), Min: v[0], Med: median(v), Max: v[len(v)-1]}
}

// median returns the median of v (the mean of the middle two for an even
// count), or 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// spread returns the largest distance from the median to a run, as a
// fraction of the median: "±spread" covers every run.
func (s summary) spread() float64 {
	if s.Med == 0 {
		return 0
	}
	return max(s.Max-s.Med, s.Med-s.Min) / math.Abs(s.Med)
}

// covers reports whether v lies within the median ± spread.
func (s summary) covers(v float64) bool {
	d := s.spread() * math.Abs(s.Med)
	return v >= s.Med-d-1e-12 && v <= s.Med+d+1e-12
}

// pm formats s as the median and its spread, "12.3 ±4%", with the
// median in format f.
func (s summary) pm(f string) string {
	if s.N == 0 {
		return "-"
	}
	m := fmt.Sprintf(f, s.Med)
	if s.N == 1 {
		return m
	}
	return m + fmt.Sprintf(" ±%.0f%%", 100*s.spread())
}

// rng formats s as the median and the range, "1.85 (1.80-1.90)".
func (s summary) rng(f string) string {
	if s.N == 0 {
		return "-"
	}
	if s.N == 1 {
		return fmt.Sprintf(f, s.Med)
	}
	return fmt.Sprintf(f+" ("+f+"-"+f+")", s.Med, s.Min, s.Max)
}

// mannWhitney is the two-sided p-value of the Mann-Whitney U test that the
// samples a and b come from one distribution, as benchstat computes it: the
// exact distribution of U for small samples without ties, the normal
// approximation with the tie and continuity corrections otherwise. It is 1
// when either sample is empty.
func mannWhitney(a, b []float64) float64 {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return 1
	}
	type obs struct {
		v   float64
		inA bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	// Ranks, ties sharing their mean rank; tieSum is sum(t^3 - t).
	var rankA, tieSum float64
	ties := false
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		r := float64(i+j+1) / 2 // mean of ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].inA {
				rankA += r
			}
		}
		if t := float64(j - i); t > 1 {
			ties = true
			tieSum += t*t*t - t
		}
		i = j
	}
	u := rankA - float64(n1*(n1+1))/2
	mu := float64(n1*n2) / 2
	if !ties && n1+n2 <= 50 {
		// P(U <= min(u, n1*n2-u)), doubled.
		lo := min(u, float64(n1*n2)-u)
		p := 2 * uCDF(n1, n2, int(math.Round(lo)))
		return min(p, 1)
	}
	n := float64(n1 + n2)
	sigma := math.Sqrt(float64(n1*n2) / 12 * ((n + 1) - tieSum/(n*(n-1))))
	if sigma == 0 {
		return 1
	}
	z := (math.Abs(u-mu) - 0.5) / sigma
	if z < 0 {
		return 1
	}
	return min(math.Erfc(z/math.Sqrt2), 1)
}

// uCDF is P(U <= u) under the null hypothesis for samples of n1 and n2
// without ties: the share of the C(n1+n2, n1) orderings whose U is at most
// u, counted by the recurrence f(n1, n2, u) = f(n1-1, n2, u-n2) + f(n1, n2-1, u).
func uCDF(n1, n2, u int) float64 {
	if u < 0 {
		return 0
	}
	// f[i][j][k]: orderings of i and j values with U = k; one slice per
	// (i, j), built up by i.
	maxU := n1 * n2
	count := func(i, j int) []float64 { return make([]float64, i*j+1) }
	prev := make([][]float64, n2+1) // prev[j] = f(i-1, j, .)
	for j := 0; j <= n2; j++ {
		prev[j] = count(0, j)
		prev[j][0] = 1
	}
	for i := 1; i <= n1; i++ {
		cur := make([][]float64, n2+1)
		cur[0] = count(i, 0)
		cur[0][0] = 1
		for j := 1; j <= n2; j++ {
			c := count(i, j)
			for k := range c {
				if k-j >= 0 && k-j < len(prev[j]) {
					c[k] += prev[j][k-j]
				}
				if k < len(cur[j-1]) {
					c[k] += cur[j-1][k]
				}
			}
			cur[j] = c
		}
		prev = cur
	}
	dist := prev[n2]
	var below, total float64
	for k := 0; k <= maxU; k++ {
		total += dist[k]
		if k <= u {
			below += dist[k]
		}
	}
	return below / total
}
