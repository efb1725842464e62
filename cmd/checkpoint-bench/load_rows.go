package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/gocheckpoint/checkpoint"
)

// firstLists returns the median time of the first List of a store opened
// anew on dir, which holds files checkpoints, with procs processors. The
// files' pages are in the operating system's cache after the first run:
// this is the cost of a restart, not of a cold disk.
func (b *bench) firstLists(dir string, files, procs int) (time.Duration, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	var ds []time.Duration
	for i := 0; i < b.cfg.coldLists; i++ {
		s, err := checkpoint.Open[World](dir, checkpoint.ReadOnly())
		if err != nil {
			return 0, err
		}
		start := time.Now()
		list, err := s.List(b.ctx)
		d := time.Since(start)
		s.Close()
		if err != nil {
			return 0, err
		}
		if len(list) != files {
			return 0, fmt.Errorf("list found %d checkpoints, want %d", len(list), files)
		}
		ds = append(ds, d)
	}
	return median(ds), nil
}

// loadHeap measures the heap a Load of the large state needs beyond the
// decoded value, plain and zstd (see heapOf for the method).
func (b *bench) loadHeap() ([]row, error) {
	world := b.worlds[b.cfg.large]
	state, err := json.Marshal(world)
	if err != nil {
		return nil, err
	}
	n := 3
	// What encoding/json allocates to decode the state's bytes from
	// memory: the decoded value, with encoding/json's own garbage.
	unmarshal, err := heapOf(n, func() (call, func(), error) {
		return func() (any, error) {
			var v World
			return &v, json.Unmarshal(state, &v)
		}, func() {}, nil
	})
	if err != nil {
		return nil, err
	}
	// The same with the decoder a Load streams through, from memory: the
	// decoded value and that decoder's own garbage.
	unmarshalV2, err := heapOf(n, func() (call, func(), error) {
		return func() (any, error) {
			var v World
			return &v, jsonv2.Unmarshal(state, &v, jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))
		}, func() {}, nil
	})
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, c := range []int{0, 2} { // plain, zstd
		comp := compressions[c]
		dir := b.subdir("heap-" + comp.name)
		w, err := checkpoint.Open[World](dir, append(comp.opts, checkpoint.NoSync())...)
		if err != nil {
			return nil, err
		}
		info, err := w.Save(b.ctx, 1, world)
		w.Close()
		if err != nil {
			return nil, err
		}
		load, err := heapOf(n, func() (call, func(), error) {
			s, err := checkpoint.Open[World](dir, checkpoint.ReadOnly())
			if err != nil {
				return nil, nil, err
			}
			return func() (any, error) {
				v, _, err := s.Load(b.ctx, 1)
				return &v, err
			}, func() { s.Close() }, nil
		})
		if err != nil {
			return nil, err
		}
		extra := float64(load.allocated) - float64(unmarshal.allocated)
		share := extra / float64(len(state))
		rows = append(rows, row{
			what:   fmt.Sprintf("peak heap of Load beyond the decoded value, %s, %s state (file %s)", comp.name, sizeName(len(state)), sizeName(int(info.Size))),
			result: fmt.Sprintf("%s (Load allocates %s with the collector off)", sizeName(int(max(extra, 0))), sizeName(int(load.allocated))),
			against: fmt.Sprintf("json.Unmarshal of the state's bytes in memory allocates %s (the streaming decoder, from memory: %s, so the stream itself costs %s); the decoded value keeps %s",
				sizeName(int(unmarshal.allocated)), sizeName(int(unmarshalV2.allocated)),
				sizeName(int(max(float64(load.allocated)-float64(unmarshalV2.allocated), 0))), sizeName(int(unmarshal.retained))),
			ratio:  fmt.Sprintf("%.3f of the state's size", share),
			target: map[bool]string{true: "≤ 0.25", false: "—"}[c == 0],
			met:    map[bool]string{true: yesNo(share <= 0.25), false: "—"}[c == 0],
		})
	}
	return rows, nil
}

// heapUse is what one call allocated and what its result keeps alive.
type heapUse struct {
	allocated uint64 // bytes allocated during the call (the median of n)
	retained  uint64 // bytes of the heap the result keeps alive
}

// call is one measured call, returning what it decoded.
type call func() (any, error)

// heapOf measures calls that fresh makes (each on a new store: a warm
// store's spare buffers were allocated before the call, and the call's peak
// includes them), after one call warmed up the package's own caches, on
// one processor with the collector off. Nothing allocated during a call is
// freed before it returns, so what the heap grows by is everything the call
// allocated: an upper bound of the peak of its live heap, whatever the
// collector would have done. heapOf also measures, with the collector on,
// how much of the heap a call's result keeps alive once the garbage is
// collected.
func heapOf(n int, fresh func() (call, func(), error)) (heapUse, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	measure := func(f func(c call) error) error {
		c, done, err := fresh()
		if err != nil {
			return err
		}
		defer done()
		return f(c)
	}
	// Two collections empty the sync.Pools (encoding/json's among them),
	// whose victims survive one.
	gc := func() { runtime.GC(); runtime.GC() }
	var use heapUse
	var before, after runtime.MemStats
	err := measure(func(c call) error { _, err := c(); return err }) // warm up
	if err != nil {
		return use, err
	}
	err = measure(func(c call) error {
		gc()
		runtime.ReadMemStats(&before)
		v, err := c()
		gc()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(v)
		use.retained = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
		return err
	})
	if err != nil {
		return use, err
	}

	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var sizes []uint64
	for i := 0; i < n; i++ {
		err := measure(func(c call) error {
			gc()
			runtime.ReadMemStats(&before)
			v, err := c()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(v)
			sizes = append(sizes, after.TotalAlloc-before.TotalAlloc)
			return err
		})
		if err != nil {
			return use, err
		}
	}
	slices.Sort(sizes)
	use.allocated = sizes[len(sizes)/2]
	return use, nil
}
