// Package benchkit holds what the benchmark commands share: the way they
// compare operations on a shared, noisy machine, and how they describe
// the machine in their reports (cmd/checkpoint-bench, and
// s3store/cmd/checkpoint-bench-s3 in the s3store module).
package benchkit

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Compare times ops against each other on a shared, noisy machine: each
// op is called once to warm up (caches, pools, connections); then in each
// of rounds rounds every op runs perRound times, in a rotating order, and
// the result for an op is the median over the rounds of its mean. i
// numbers each op's calls from 0, so that each save can use a step of its
// own.
func Compare(rounds, perRound int, ops ...func(i int) error) ([]time.Duration, error) {
	means := make([][]time.Duration, len(ops))
	next := make([]int, len(ops))
	call := func(i, n int) (time.Duration, error) {
		start := time.Now()
		for k := 0; k < n; k++ {
			if err := ops[i](next[i]); err != nil {
				return 0, err
			}
			next[i]++
		}
		return time.Since(start) / time.Duration(n), nil
	}
	for i := range ops {
		if _, err := call(i, 1); err != nil {
			return nil, err
		}
	}
	for r := 0; r < rounds; r++ {
		for k := range ops {
			i := (k + r) % len(ops)
			d, err := call(i, perRound)
			if err != nil {
				return nil, err
			}
			means[i] = append(means[i], d)
		}
	}
	out := make([]time.Duration, len(ops))
	for i := range means {
		out[i] = Median(means[i])
	}
	return out, nil
}

// Median returns the median of ds, which must not be empty.
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Machine describes where the benchmark runs: CPU, cores, system, Go.
func Machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s/%s, %s", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// LoadAverage returns the system's load averages over 1, 5 and 15
// minutes (Linux), or "unknown".
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Duration formats a duration for a table, to 3 significant digits.
func Duration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
}
