// Command checkpoint-bench measures the checkpoint package on this machine
// and prints one table: Save against a hand-written durable save (up to a
// 1 MB state, and with KeepLast(3) against a save that removes its oldest
// file) and against the disk's own floor, gzip and zstd against the
// standard library's gzip, Load and Latest for small and large states and
// the peak heap of a large Load, the first List after Open and List,
// Latest and Prune in a directory of 10,000 checkpoints, the allocations
// of a save, the caller-visible latency of an Async save, and what
// Encrypt costs a Save, a Load and a first List.
//
//	go run ./cmd/checkpoint-bench              # in a temporary directory
//	go run ./cmd/checkpoint-bench -dir /data   # on the disk the host uses
//
// BENCHMARKS.md says how long a run takes and how each row is measured. Each
// comparison interleaves what it compares and reports medians, but the
// machine's other work still shows: the load average is printed before and
// after. The temporary directory is /tmp by default, which may be a memory
// file system where fsync costs nothing; the file system is printed with the
// results.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/benchkit"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint-bench:", err)
		os.Exit(1)
	}
}

// settings are the sizes and counts of a run.
type settings struct {
	small, medium, large int // state sizes in bytes
	mega                 int // the state of the 1 MB save row
	files                int // checkpoints in the big directory
	coldLists            int // first Lists of a new store, for a median
	rounds, perRound     int // interleaved comparisons
	samples              int // single-call latencies
	compressBudget       time.Duration
	payload              int64 // the byte payload of payloadHeap
	sealedSave           int   // the state of the encrypted save row
}

var (
	full  = settings{small: 10 << 10, medium: 100 << 10, large: 10 << 20, mega: 1 << 20, files: 10000, coldLists: 9, rounds: 41, perRound: 10, samples: 201, compressBudget: 2 * time.Second, payload: 1 << 30, sealedSave: 60 << 10}
	quick = settings{small: 2 << 10, medium: 10 << 10, large: 200 << 10, mega: 20 << 10, files: 300, coldLists: 2, rounds: 3, perRound: 2, samples: 5, compressBudget: 50 * time.Millisecond, payload: 8 << 20, sealedSave: 6 << 10}
)

// sectionNames are the measurements' sections, in the order they run.
var sectionNames = []string{"saves", "largeSave", "retention", "async", "compressors", "loads", "loadHeap", "payloadHeap", "bigDirectory", "allocations", "encrypt"}

// row is one line of the table.
type row struct {
	what, result, against, ratio, target, met string
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("checkpoint-bench", flag.ContinueOnError)
	fs.SetOutput(out)
	dirFlag := fs.String("dir", "", "directory on the disk to measure (default: the system's temporary directory)")
	quickFlag := fs.Bool("quick", false, "tiny sizes and counts: checks that the command works, measures nothing")
	keep := fs.Bool("keep", false, "keep the files written")
	payloadSize := fs.Int64("payload-size", 0, "the size in bytes of the byte payload of payloadHeap (default 1 GiB, with -quick 8 MiB); a plain file of that size is written")
	only := fs.String("only", "", "comma-separated sections to run (of "+strings.Join(sectionNames, ", ")+"); all if empty")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (for go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg := full
	if *quickFlag {
		cfg = quick
	}
	if *dirFlag != "" {
		if err := os.MkdirAll(*dirFlag, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(*dirFlag, "checkpoint-bench-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	b := &bench{cfg: cfg, dir: dir, ctx: context.Background(), payloadSize: cfg.payload}
	if *payloadSize > 0 {
		b.payloadSize = *payloadSize
	}
	started := time.Now()
	loadBefore := loadAverage()

	worlds := map[int]World{}
	for _, size := range []int{cfg.small, cfg.medium, cfg.mega, cfg.large} {
		worlds[size] = newWorld(size)
	}
	b.worlds = worlds

	fmt.Fprintf(out, "# checkpoint-bench, %s\n\n", started.UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "- command: `checkpoint-bench %s`\n", strings.Join(args, " "))
	fmt.Fprintf(out, "- machine: %s\n", machine())
	fmt.Fprintf(out, "- directory: %s, %s\n", dir, filesystem(dir))
	fmt.Fprintf(out, "- states (JSON): %s\n", b.describeStates())
	fmt.Fprintf(out, "- load average before: %s\n\n", loadBefore)

	sections := map[string]func() ([]row, error){
		"saves": b.saves, "largeSave": b.largeSave, "retention": b.retention, "async": b.async, "compressors": b.compressors,
		"loads": b.loads, "loadHeap": b.loadHeap, "payloadHeap": b.payloadHeap, "bigDirectory": b.bigDirectory, "allocations": b.allocations,
		"encrypt": b.encrypt,
	}
	names := sectionNames
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	var rows []row
	for _, name := range names {
		section, ok := sections[name]
		if !ok {
			return fmt.Errorf("-only: no section %q (the sections: %s)", name, strings.Join(sectionNames, ", "))
		}
		rs, err := section()
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
	}

	fmt.Fprintln(out, "| measurement | result | compared with | ratio | target | met |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", r.what, r.result, r.against, r.ratio, r.target, r.met)
	}
	fmt.Fprintf(out, "\nload average after: %s; run took %s\n", loadAverage(), time.Since(started).Round(time.Second))
	return nil
}

type bench struct {
	cfg    settings
	dir    string
	ctx    context.Context
	worlds map[int]World
	n      int // directories made
	// payloadSize is the byte payload's size in payloadHeap.
	payloadSize int64
}

// subdir returns a new directory for one measurement.
func (b *bench) subdir(name string) string {
	b.n++
	return filepath.Join(b.dir, fmt.Sprintf("%02d-%s", b.n, name))
}

func (b *bench) describeStates() string {
	var parts []string
	for _, size := range []int{b.cfg.small, b.cfg.medium, b.cfg.mega, b.cfg.large} {
		w := b.worlds[size]
		parts = append(parts, fmt.Sprintf("%s (%d agents)", sizeName(encodedSize(w)), len(w.Agents)))
	}
	return strings.Join(parts, ", ")
}

var compressions = []struct {
	name string
	opts []checkpoint.Option
}{
	{"plain", nil},
	{"gzip", []checkpoint.Option{checkpoint.Gzip()}},
	{"zstd", []checkpoint.Option{checkpoint.Zstd()}},
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// saves compares Save with the hand-written baseline, and plain Save with
// the durable-write floor, for the small and medium states.
func (b *bench) saves() ([]row, error) {
	var rows []row
	for _, size := range []int{b.cfg.small, b.cfg.medium} {
		world := b.worlds[size]
		for _, c := range compressions {
			s, err := checkpoint.Open[World](b.subdir("save-"+c.name), c.opts...)
			if err != nil {
				return nil, err
			}
			base, err := newBaseline(b.subdir("baseline-"+c.name), c.name)
			if err != nil {
				return nil, err
			}
			ours := func(i int) error {
				_, err := s.Save(b.ctx, int64(i), world)
				return err
			}
			theirs := func(i int) error { return base.save(i, world) }
			ops := []op{ours, theirs}
			if c.name == "plain" {
				// The floor writes the bytes a Save wrote.
				probe, err := checkpoint.Open[World](b.subdir("probe"), checkpoint.NoSync())
				if err != nil {
					return nil, err
				}
				info, err := probe.Save(b.ctx, 0, world)
				probe.Close()
				if err != nil {
					return nil, err
				}
				data, err := os.ReadFile(info.Location)
				if err != nil {
					return nil, err
				}
				floorDir := b.subdir("floor")
				if err := os.MkdirAll(floorDir, 0o755); err != nil {
					return nil, err
				}
				summed, err := newBaseline(b.subdir("baseline-crc32c"), c.name)
				if err != nil {
					return nil, err
				}
				summed.sum = true
				ops = append(ops,
					func(i int) error { return floorWrite(floorDir, fmt.Sprintf("f%08d.json", i), data) },
					func(int) error { return json.NewEncoder(io.Discard).Encode(world) },
					func(i int) error { return summed.save(i, world) })
			}
			ds, err := compare(b.cfg.rounds, b.cfg.perRound, ops...)
			s.Close()
			if err != nil {
				return nil, err
			}
			r := ratio(ds[0], ds[1])
			target := saveTarget(c.name, size, b.cfg.medium)
			rows = append(rows, row{
				what:    fmt.Sprintf("Save, %s, %s state, durable", c.name, sizeName(size)),
				result:  dur(ds[0]),
				against: "hand-written json + renameio + dir fsync: " + dur(ds[1]),
				ratio:   fmt.Sprintf("%.3f", r),
				target:  fmt.Sprintf("≤ %.2f", target),
				met:     yesNo(r <= target),
			})
			if len(ds) == 5 {
				floor, enc, summed := ds[2], ds[3], ds[4]
				rows = append(rows, row{
					what:    fmt.Sprintf("Save, plain, %s state, durable, vs a baseline that also checksums", sizeName(size)),
					result:  dur(ds[0]),
					against: "the same hand-written save plus a CRC-32C of its bytes: " + dur(summed),
					ratio:   fmt.Sprintf("%.3f", ratio(ds[0], summed)),
					target:  "—",
					met:     "—",
				})
				rows = append(rows, row{
					what:    fmt.Sprintf("Save, plain, %s state, vs the disk's floor", sizeName(size)),
					result:  dur(ds[0]),
					against: fmt.Sprintf("write + fsync + rename + dir fsync of the same bytes: %s, plus encoding/json: %s", dur(floor), dur(enc)),
					ratio:   fmt.Sprintf("%.3f of the floor, %.3f of floor + encoding", ratio(ds[0], floor), ratio(ds[0], floor+enc)),
					target:  "as close as possible",
					met:     "—",
				})
			}
		}
	}
	return rows, nil
}

// async measures the latency the caller sees: a durable Save, an Async
// Save (the queue drained, untimed, after each call, as when the disk keeps
// up) and a NoSync Save, interleaved call by call.
func (b *bench) async() ([]row, error) {
	var rows []row
	for _, size := range []int{b.cfg.small, b.cfg.medium} {
		world := b.worlds[size]
		durable, err := checkpoint.Open[World](b.subdir("durable"))
		if err != nil {
			return nil, err
		}
		defer durable.Close()
		async, err := checkpoint.Open[World](b.subdir("async"), checkpoint.Async(4))
		if err != nil {
			return nil, err
		}
		defer async.Close()
		nosync, err := checkpoint.Open[World](b.subdir("nosync"), checkpoint.NoSync())
		if err != nil {
			return nil, err
		}
		defer nosync.Close()
		stores := []*checkpoint.Store[World]{durable, async, nosync}
		samples := make([][]time.Duration, len(stores))
		for i := 0; i < b.cfg.samples; i++ {
			for k, s := range stores {
				start := time.Now()
				if _, err := s.Save(b.ctx, int64(i), world); err != nil {
					return nil, err
				}
				samples[k] = append(samples[k], time.Since(start))
				if err := s.Flush(b.ctx); err != nil {
					return nil, err
				}
			}
		}
		d, a, n := median(samples[0]), median(samples[1]), median(samples[2])
		if size == b.cfg.small {
			tr, err := b.asyncThroughput(world)
			if err != nil {
				return nil, err
			}
			rows = append(rows, tr...)
		}
		r := ratio(a, d)
		rows = append(rows, row{
			what:    fmt.Sprintf("Async Save, %s state, latency seen by the caller", sizeName(size)),
			result:  dur(a),
			against: "durable Save: " + dur(d),
			ratio:   fmt.Sprintf("%.3f", r),
			target:  fmt.Sprintf("≤ %.2f", asyncTarget(size, b.cfg.small)),
			met:     yesNo(r <= asyncTarget(size, b.cfg.small)),
		}, row{
			what:    fmt.Sprintf("NoSync Save, %s state", sizeName(size)),
			result:  dur(n),
			against: "durable Save: " + dur(d),
			ratio:   fmt.Sprintf("%.3f", ratio(n, d)),
			target:  "—",
			met:     "—",
		})
	}
	return rows, nil
}

// throughputQueue is the queue of the Async store of the throughput row.
const throughputQueue = 16

// asyncThroughput measures the sustained rate of durable saves of world: a
// loop of durable Saves against an Async store (its queued saves published
// together, one directory fsync per batch) with a Flush every
// flushEvery saves, both counting to Flush's return. The two alternate in
// rounds of flushEvery saves each (five of them, or one of 10 saves with
// -quick), and the result is the median time per save. Two rows follow
// it: the CPU per save of each side, with the bound it sets on the
// ratio, and how creating a file in the Async store's directory scales
// over the cores (creationScaling).
func (b *bench) asyncThroughput(world World) ([]row, error) {
	const flushEvery = 100
	rounds, per := 5, flushEvery
	if b.cfg.samples < 10 { // -quick
		rounds, per = 1, 10
	}
	durable, err := checkpoint.Open[World](b.subdir("throughput-durable"))
	if err != nil {
		return nil, err
	}
	defer durable.Close()
	asyncDir := b.subdir("throughput-async")
	async, err := checkpoint.Open[World](asyncDir, checkpoint.Async(throughputQueue))
	if err != nil {
		return nil, err
	}
	defer async.Close()
	var step int64
	var ds, as, dcpu, acpu []time.Duration
	cpuOK := true
	for i := 0; i < rounds; i++ {
		for k, s := range []*checkpoint.Store[World]{durable, async} {
			cpu0, ok0 := processCPU()
			start := time.Now()
			for j := 0; j < per; j++ {
				step++
				if _, err := s.Save(b.ctx, step, world); err != nil {
					return nil, err
				}
			}
			if err := s.Flush(b.ctx); err != nil {
				return nil, err
			}
			d := time.Since(start) / time.Duration(per)
			cpu1, ok1 := processCPU()
			cpuOK = cpuOK && ok0 && ok1
			c := (cpu1 - cpu0) / time.Duration(per)
			if k == 0 {
				ds, dcpu = append(ds, d), append(dcpu, c)
			} else {
				as, acpu = append(as, d), append(acpu, c)
			}
		}
	}
	// Both stores closed (Close waits for the spares being made), so that
	// the probe below creates files alone.
	if err := errors.Join(durable.Close(), async.Close()); err != nil {
		return nil, err
	}
	d, a := median(ds), median(as)
	r := ratio(d, a)
	rows := []row{{
		what:    fmt.Sprintf("Async(%d) throughput, %s durable saves, Flush every %d, time per save", throughputQueue, sizeName(b.cfg.small), flushEvery),
		result:  fmt.Sprintf("%s (%.0f saves/s)", dur(a), float64(time.Second)/float64(a)),
		against: fmt.Sprintf("a loop of durable Saves: %s (%.0f saves/s)", dur(d), float64(time.Second)/float64(d)),
		ratio:   fmt.Sprintf("%.2fx the saves per second", r),
		target:  "≥ 2x",
		met:     yesNo(r >= 2),
	}}

	// However the saves are spread over the cores, an Async save takes at
	// least the CPU it uses shared among them: the loop's time per save
	// over that share bounds the ratio above. Where it is near 2x (creating
	// a file costs more CPU than a sync waits, see BENCHMARKS.md), 2x needs
	// nearly every core busy with the saves. A spare still being made when
	// a round ends is counted in the next round, the other store's: up to
	// eight of the Async store's, one of the loop's. So the Async store's
	// CPU reads low rather than high, and the bound high rather than low.
	ncpu := runtime.NumCPU()
	ac, dc := median(acpu), median(dcpu)
	cpuRow := row{
		what:    fmt.Sprintf("CPU per save of the Async(%d) row (user and system, all threads), and that row's bound on %d cores", throughputQueue, ncpu),
		result:  "not measured: this system counts a process's CPU in coarse ticks",
		against: "—",
		ratio:   "—",
		target:  "—",
		met:     "—",
	}
	switch {
	case cpuOK && (ac <= 0 || dc <= 0):
		cpuRow.result = "not measured: too brief to count"
	case cpuOK:
		cpuRow.result = fmt.Sprintf("Async: %s (%.2f cores busy)", dur(ac), float64(ac)/float64(a))
		cpuRow.against = fmt.Sprintf("the loop: %s (%.2f cores busy)", dur(dc), float64(dc)/float64(d))
		cpuRow.ratio = fmt.Sprintf("at most %.2fx with all %d busy; 2x needs %.2f busy", float64(d)*float64(ncpu)/float64(ac), ncpu, 2*float64(ac)/float64(d))
	}
	rows = append(rows, cpuRow)

	// What creating the files costs, the kernel's work that bounds the
	// rows above where it is dear: how it scales over the cores, in the
	// same directory, made as the store makes its spares.
	n, probeRounds := 200, 3
	if b.cfg.samples < 10 { // -quick
		n, probeRounds = 20, 1
	}
	n = max(n-n%ncpu, ncpu)
	one, many, busy, why := creationScaling(asyncDir, n, ncpu, probeRounds)
	probe := row{
		what:    fmt.Sprintf("creating an empty unnamed file in the Async(%d) row's directory, on %d threads at once", throughputQueue, ncpu),
		result:  "not measured: " + why,
		against: "—",
		ratio:   "—",
		target:  "—",
		met:     "—",
	}
	if why == "" {
		probe.result = fmt.Sprintf("%s per file (%.2f cores busy)", dur(many), busy)
		probe.against = "on one thread: " + dur(one) + " per file"
		probe.ratio = fmt.Sprintf("%.2fx the files per second", ratio(one, many))
	}
	return append(rows, probe), nil
}

// compressors compares the compressors on the medium state's JSON, and the
// cost of a new compressor with that of a reused one on the small state.
func (b *bench) compressors() ([]row, error) {
	data, err := json.Marshal(b.worlds[b.cfg.medium])
	if err != nil {
		return nil, err
	}
	res, err := measureCompressors(data, b.cfg.compressBudget)
	if err != nil {
		return nil, err
	}
	kz, sz, zs := res[0], res[1], res[2]
	shrink := func(r compressorResult) string {
		return fmt.Sprintf("compress %.0f MB/s, decompress %.0f MB/s, %s (%.1fx smaller)", r.mbs, r.dmbs, sizeName(r.size), float64(len(data))/float64(r.size))
	}
	rows := []row{{
		what:    fmt.Sprintf("gzip, klauspost vs compress/gzip, default level, %s of JSON", sizeName(len(data))),
		result:  shrink(kz),
		against: shrink(sz),
		ratio:   fmt.Sprintf("%.2fx compressing, %.2fx decompressing", kz.mbs/sz.mbs, kz.dmbs/sz.dmbs),
		target:  "≥ 2x compressing",
		met:     yesNo(kz.mbs/sz.mbs >= 2),
	}, {
		what:    fmt.Sprintf("zstd, klauspost, default level, %s of JSON", sizeName(len(data))),
		result:  shrink(zs),
		against: "gzip (klauspost): " + shrink(kz),
		ratio:   fmt.Sprintf("%.2fx compressing, %.2fx decompressing; vs compress/gzip %.1fx, %.1fx", zs.mbs/kz.mbs, zs.dmbs/kz.dmbs, zs.mbs/sz.mbs, zs.dmbs/sz.dmbs),
		target:  "—",
		met:     "—",
	}}
	small, err := json.Marshal(b.worlds[b.cfg.small])
	if err != nil {
		return nil, err
	}
	fresh, reused, err := creationCost(small, b.cfg.perRound*4)
	if err != nil {
		return nil, err
	}
	for i, name := range []string{"gzip", "zstd"} {
		rows = append(rows, row{
			what:    fmt.Sprintf("%s of %s, reused compressor (as Save does)", name, sizeName(len(small))),
			result:  dur(reused[i]),
			against: "a new compressor each time: " + dur(fresh[i]),
			ratio:   fmt.Sprintf("%.3f", ratio(reused[i], fresh[i])),
			target:  "—",
			met:     "—",
		})
	}
	return rows, nil
}

// loads measures Load and Latest on a store of a few checkpoints for each
// state size, plain and zstd.
func (b *bench) loads() ([]row, error) {
	var rows []row
	for _, size := range []int{b.cfg.small, b.cfg.medium, b.cfg.large} {
		world := b.worlds[size]
		n := max(3, b.cfg.samples*(b.cfg.small)/size)
		for _, c := range []int{0, 2} { // plain, zstd
			comp := compressions[c]
			dir := b.subdir("load-" + comp.name)
			w, err := checkpoint.Open[World](dir, append(comp.opts, checkpoint.NoSync())...)
			if err != nil {
				return nil, err
			}
			for step := int64(1); step <= 3; step++ {
				if _, err := w.Save(b.ctx, step, world); err != nil {
					return nil, err
				}
			}
			w.Close()
			s, err := checkpoint.Open[World](dir, checkpoint.ReadOnly())
			if err != nil {
				return nil, err
			}
			ds, err := compare(n, 1,
				func(int) error { _, _, err := s.Load(b.ctx, 2); return err },
				func(int) error { _, _, err := s.Latest(b.ctx); return err })
			s.Close()
			if err != nil {
				return nil, err
			}
			rows = append(rows, row{
				what:    fmt.Sprintf("Load / Latest, %s, %s state", comp.name, sizeName(size)),
				result:  fmt.Sprintf("Load %s, Latest %s", dur(ds[0]), dur(ds[1])),
				against: "—",
				ratio:   "—",
				target:  "—",
				met:     "—",
			})
		}
	}
	return rows, nil
}

// bigDirectory measures List, Latest, Load and Prune with cfg.files
// checkpoints of the small state in one directory.
func (b *bench) bigDirectory() ([]row, error) {
	files := b.cfg.files
	world := b.worlds[b.cfg.small]
	dir := b.subdir("big")
	w, err := checkpoint.Open[World](dir, checkpoint.NoSync())
	if err != nil {
		return nil, err
	}
	for step := 0; step < files; step++ {
		world.Turn = int64(step)
		if _, err := w.Save(b.ctx, int64(step), world); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	label := fmt.Sprintf("%d checkpoints", files)

	// The first List of a store opened anew reads every header; its
	// median over fresh stores, on every processor and on one.
	coldList, err := b.firstLists(dir, files, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	coldListOne, err := b.firstLists(dir, files, 1)
	if err != nil {
		return nil, err
	}
	// Without the header index the writer's Close left (a store whose
	// writer was killed before it wrote one): every header is read. The
	// ReadOnly stores do not write it back; the writer below does.
	if err := os.Remove(filepath.Join(dir, ".checkpoint.index")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	coldRead, err := b.firstLists(dir, files, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}

	// A fresh store, as after a restart: durable, with a retention rule
	// that keeps everything.
	s, err := checkpoint.Open[World](dir, checkpoint.KeepLast(files))
	if err != nil {
		return nil, err
	}
	defer func() { s.Close() }()
	if _, err := s.List(b.ctx); err != nil {
		return nil, err
	}

	// The naive reader must find what Latest finds, or the row compares
	// two different things.
	got, _, err := s.Latest(b.ctx)
	if err != nil {
		return nil, err
	}
	naive, err := benchkit.NaiveLatest[World](dir, "step_")
	if err != nil {
		return nil, err
	}
	if !reflect.DeepEqual(got, naive) {
		return nil, fmt.Errorf("the naive reader decoded turn %d, Latest turn %d", naive.Turn, got.Turn)
	}

	n := max(3, b.cfg.samples/3)
	ds, err := compare(n, 1,
		func(int) error { _, err := s.List(b.ctx); return err },
		func(int) error { _, _, err := s.Latest(b.ctx); return err },
		func(int) error { _, _, err := s.Load(b.ctx, int64(files/2)); return err },
		func(int) error { return readNames(dir) },
		func(int) error { _, err := s.Prune(b.ctx); return err },
		func(int) error { _, err := benchkit.NaiveLatest[World](dir, "step_"); return err },
	)
	if err != nil {
		return nil, err
	}
	list1, latest, load, names, prune, naiveD := ds[0], ds[1], ds[2], ds[3], ds[4], ds[5]
	listTarget := 20 * time.Millisecond
	rows := []row{{
		what:    "first List after Open, " + label,
		result:  dur(coldList),
		against: fmt.Sprintf("on one processor: %s; without the header index (reads every header): %s; reading the names alone: %s", dur(coldListOne), dur(coldRead), dur(names)),
		ratio:   fmt.Sprintf("%.2f of one processor's time (%d processors)", ratio(coldList, coldListOne), runtime.GOMAXPROCS(0)),
		target:  "≤ 40 ms",
		met:     yesNo(coldList <= 40*time.Millisecond),
	}, {
		what:    "List, " + label,
		result:  dur(list1),
		against: fmt.Sprintf("first List of a new store (from the header index): %s; reading the names alone: %s", dur(coldList), dur(names)),
		ratio:   "—",
		target:  "≤ 20 ms",
		met:     yesNo(list1 <= listTarget),
	}, {
		what:    "Latest, " + label,
		result:  dur(latest),
		against: "Load of one step: " + dur(load),
		ratio:   fmt.Sprintf("%+.2f ms", float64(latest-load)/1e6),
		target:  "≤ Load + 1 ms",
		met:     yesNo(latest <= load+time.Millisecond),
	}, {
		what:    "Latest vs a naive reader, " + label,
		result:  dur(latest),
		against: "naive reader (read the names, decode the newest file with encoding/json, no checksum): " + dur(naiveD),
		ratio:   fmt.Sprintf("%.2f", ratio(latest, naiveD)),
		target:  "≤ 1.00",
		met:     yesNo(latest <= naiveD),
	}, {
		what:    "Prune (KeepLast, nothing to remove), " + label,
		result:  dur(prune),
		against: "—",
		ratio:   "—",
		target:  "—",
		met:     "—",
	}}
	if err := s.Close(); err != nil {
		return nil, err
	}
	keep := max(1, files/100)
	s, err = checkpoint.Open[World](dir, checkpoint.KeepLast(keep))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	removed, err := s.Prune(b.ctx)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{
		what:    fmt.Sprintf("Prune to KeepLast(%d), %s (one run)", keep, label),
		result:  dur(time.Since(start)),
		against: fmt.Sprintf("removed %d files, then one directory fsync", len(removed)),
		ratio:   "—",
		target:  "—",
		met:     "—",
	})
	return rows, nil
}

func readNames(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.Readdirnames(-1)
	return err
}

// allocations measures what a warm Save allocates, for the medium and large
// states, beside what encoding the state with encoding/json alone allocates
// and what the hand-written save allocates (its json.Marshal returns a new
// copy of the state every time).
func (b *bench) allocations() ([]row, error) {
	var rows []row
	for _, size := range []int{b.cfg.medium, b.cfg.large} {
		world := b.worlds[size]
		n := max(2, b.cfg.perRound*b.cfg.medium/size)
		encBytes, _, err := allocs(n, func(int) error { return json.NewEncoder(io.Discard).Encode(world) })
		if err != nil {
			return nil, err
		}
		for _, c := range compressions {
			s, err := checkpoint.Open[World](b.subdir("allocs-"+c.name), append(c.opts, checkpoint.NoSync())...)
			if err != nil {
				return nil, err
			}
			bytesOp, allocsOp, err := allocs(n, func(i int) error { _, err := s.Save(b.ctx, int64(i), world); return err })
			s.Close()
			if err != nil {
				return nil, err
			}
			base, err := newBaseline(b.subdir("allocs-baseline-"+c.name), c.name)
			if err != nil {
				return nil, err
			}
			baseBytes, _, err := allocs(n, func(i int) error { return base.save(i, world) })
			if err != nil {
				return nil, err
			}
			extra := (float64(bytesOp) - float64(encBytes)) / float64(encodedSize(world))
			rows = append(rows, row{
				what:    fmt.Sprintf("heap growth of a warm Save, %s, %s state", c.name, sizeName(size)),
				result:  fmt.Sprintf("%s in %d allocations", sizeName(int(bytesOp)), allocsOp),
				against: fmt.Sprintf("encoding/json alone: %s; hand-written save: %s", sizeName(int(encBytes)), sizeName(int(baseBytes))),
				ratio:   fmt.Sprintf("%+.3f states beyond encoding", extra),
				target:  "< 0.25 states: no copy",
				met:     yesNo(extra < 0.25),
			})
		}
	}
	return rows, nil
}

// saveTarget is the most a durable Save of a state of size bytes may cost,
// compressed as comp says, against the hand-written save with the same
// compressor: a plain one of the medium state 0.90 (issue 28: a faster
// save than one a host writes), a compressed one 1.00, a plain one of the
// small state 1.05.
func saveTarget(comp string, size, medium int) float64 {
	switch {
	case comp != "plain":
		return 1.00
	case size >= medium:
		return 0.90
	}
	return 1.05
}

// asyncTarget is the most an Async save of a state of size bytes may keep
// its caller, against a durable Save: 0.20 for the small state, 0.25
// above it.
func asyncTarget(size, small int) float64 {
	if size <= small {
		return 0.20
	}
	return 0.25
}
