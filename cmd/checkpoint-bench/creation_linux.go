//go:build linux

package main

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// creationScaling measures how creating files in dir scales over threads:
// n unnamed files (O_TMPFILE, as a directory store's spares are made) on
// one thread, then n shared among threads threads, rounds times in turn.
// It returns the median time per file of each, and the cores the threads
// kept busy. The files are closed once timed, which frees them. Where the
// file system makes no unnamed files it measures nothing, and says so in
// why.
func creationScaling(dir string, n, threads, rounds int) (one, many time.Duration, busy float64, why string, err error) {
	var ones, manys []time.Duration
	var busys []float64
	for range rounds {
		for _, k := range []int{1, threads} {
			wall, cpu, err := createUnnamed(dir, n, k)
			if err == unix.EOPNOTSUPP || err == unix.EISDIR {
				return 0, 0, 0, "the file system makes no unnamed files", nil
			}
			if err != nil {
				return 0, 0, 0, "", fmt.Errorf("create in %s: %w", dir, err)
			}
			if k == 1 {
				ones = append(ones, wall/time.Duration(n))
			} else {
				manys = append(manys, wall/time.Duration(n))
				busys = append(busys, float64(cpu)/float64(wall))
			}
		}
	}
	slices.Sort(busys)
	return median(ones), median(manys), busys[len(busys)/2], "", nil
}

// createUnnamed creates n unnamed files in dir on k locked threads, and
// returns the time that took and the CPU the process used meanwhile.
func createUnnamed(dir string, n, k int) (wall, cpu time.Duration, err error) {
	fds := make([][]int, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	cpu0, err := processCPU()
	if err != nil {
		return 0, 0, err
	}
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
					errs[t] = err
					return
				}
				fds[t] = append(fds[t], fd)
			}
		}()
	}
	wg.Wait()
	wall = time.Since(start)
	cpu1, err := processCPU()
	for _, l := range fds {
		for _, fd := range l {
			_ = unix.Close(fd)
		}
	}
	for _, e := range errs {
		if e != nil {
			return 0, 0, e
		}
	}
	return wall, cpu1 - cpu0, err
}
