//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// creationScaling measures how creating files in dir scales over threads:
// n unnamed files (O_TMPFILE, as a directory store's spares are made) on
// one thread and n shared among threads threads, rounds times in turn,
// each pass holding its n files open until it is timed, then closing them,
// which frees them. It returns the median time per file of each, and the
// cores the threads kept busy. threads is at least 2 and n a positive
// multiple of it; otherwise, or where the file system makes no unnamed
// files or a creation fails, it measures nothing and says why.
func creationScaling(dir string, n, threads, rounds int) (one, many time.Duration, busy float64, why string) {
	if threads < 2 {
		return 0, 0, 0, "one processor: nothing to compare"
	}
	if n <= 0 || n%threads != 0 || rounds <= 0 {
		return 0, 0, 0, fmt.Sprintf("%d files on %d threads, %d rounds: no measurement", n, threads, rounds)
	}
	var ones, manys []time.Duration
	var busys []float64
	for r := range rounds {
		// Each pass frees its files, which the kernel then skips for a
		// while (BENCHMARKS.md): the order alternates, so that neither
		// side always comes second.
		order := []int{1, threads}
		if r%2 == 1 {
			order = []int{threads, 1}
		}
		for _, k := range order {
			wall, cpu, err := createUnnamed(dir, n, k)
			if err != nil {
				return 0, 0, 0, err.Error()
			}
			if k == 1 {
				ones = append(ones, wall/time.Duration(n))
				continue
			}
			manys = append(manys, wall/time.Duration(n))
			if cpu > 0 {
				busys = append(busys, float64(cpu)/float64(wall))
			}
		}
	}
	if len(busys) == 0 {
		return 0, 0, 0, "the process's CPU could not be read"
	}
	slices.Sort(busys)
	return median(ones), median(manys), busys[len(busys)/2], ""
}

// createUnnamed creates n unnamed files in dir on k locked threads, n/k
// each, and returns the time that took and the CPU the process used
// meanwhile (0 where it could not be read). Every file made is closed
// before it returns, on an error too.
func createUnnamed(dir string, n, k int) (wall, cpu time.Duration, err error) {
	fds := make([][]int, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	cpu0, cpuOK := processCPU()
	start := time.Now()
	for t := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range n / k {
				fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
				if err != nil {
					errs[t] = &fs.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
					return
				}
				fds[t] = append(fds[t], fd)
			}
		}()
	}
	wg.Wait()
	wall = time.Since(start)
	cpu1, cpuOK1 := processCPU()
	for _, l := range fds {
		for _, fd := range l {
			_ = unix.Close(fd)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	if cpuOK && cpuOK1 {
		cpu = cpu1 - cpu0
	}
	return wall, cpu, nil
}
