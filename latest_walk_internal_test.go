package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
)

// listOnly is a directory backend that cannot scan its names (see
// listing.Scanner): a store finds the newest names in its List.
type listOnly struct{ storage.Backend }

func (l listOnly) Unwrap() storage.Backend { return l.Backend }

// walkEveryName is Latest's walk as it was before it tried the newest
// step alone (see latestWalk): every name of a listing, newest first,
// listing again when a checkpoint vanished. It is the reference the
// differential fuzz target holds latestWalk to.
func walkEveryName[T, R any](s *Store[T], ctx context.Context, op string, want func(fileName) bool, load func(context.Context, string, entry, bool) (R, Info, error)) (R, Info, []error, error) {
	for attempt := 1; ; attempt++ {
		ns, dropped, err := s.names(ctx, want)
		if err != nil {
			var zero R
			return zero, Info{}, nil, opError(op, s.dir, err)
		}
		r, info, skipped, vanished, _, err := latestWalkNames(s, ctx, op, load, ns, dropped, false)
		if !vanished || attempt == latestRelists || ctx.Err() != nil {
			return r, info, skipped, err
		}
	}
}

// walkResult is what a walk returned, comparable.
type walkResult struct {
	V       int
	Info    Info
	Skipped []string
	Err     string
}

func result(v int, info Info, skipped []error, err error) walkResult {
	r := walkResult{V: v, Info: info}
	for _, e := range skipped {
		r.Skipped = append(r.Skipped, e.Error())
	}
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// writeFuzzedDirectory makes the checkpoints that data says in dir: three
// bytes each say a step, a kind (step, final, error, rolling, or a name
// that is no checkpoint of the layout), a compression and what is at the
// name (a good file, one damaged, truncated or emptied, one of a newer
// schema, a directory, a symbolic link).
func writeFuzzedDirectory(t *testing.T, dir string, data []byte) {
	ctx := context.Background()
	quiet := WithLogger(slog.New(slog.DiscardHandler))
	for i := 0; i+3 <= len(data) && i < 3*10; i += 3 {
		step, kind, how := int64(data[i]%6)+1, data[i+1]%5, data[i+2]
		comp := []Option{quiet, NoSync(), WithRolling(), SaveEvery(1000)}
		switch how % 3 {
		case 1:
			comp = append(comp, Gzip())
		case 2:
			comp = append(comp, Zstd())
		}
		damage := how / 3 % 9
		if damage == 8 {
			comp = append(comp, WithSchema(2))
		}
		s, err := Open[int](dir, comp...)
		if err != nil {
			t.Fatal(err)
		}
		v := int(step)*10 + int(kind)
		var info Info
		switch kind {
		case 0:
			info, err = s.Save(ctx, step, v)
		case 1:
			info, err = s.SaveFinal(ctx, step, v)
		case 2:
			info, err = s.SaveError(ctx, step, v, errors.New("failed"))
		case 3:
			info, _, err = s.Tick(ctx, step, v)
		case 4:
			junk := []string{"step_%d.json", "step_%08d.txt", "other_%08d.json", "step_%08d.json.corrupt"}[how%4]
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf(junk, step)), []byte(`{"format":3}`), 0o644)
		}
		if cerr := s.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil || kind == 4 {
			continue // a step saved twice, say: ErrExists
		}
		path := filepath.Join(dir, info.Name())
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		switch damage {
		case 4:
			b[int(how)*7%len(b)] ^= 0x20
		case 5:
			b = b[:len(b)/2]
		case 6:
			b = nil
		}
		switch damage {
		case 4, 5, 6:
			err = os.WriteFile(path, b, 0o644)
		case 7:
			if err = os.Remove(path); err == nil {
				if how%2 == 0 {
					err = os.Mkdir(path, 0o755)
				} else {
					err = os.Symlink("step_00000001.json", path)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzLatestWalkAgreesWithEveryName proves that Latest's walk, which tries
// the newest step's names alone before it walks every name (from the
// directory's scan, or a List), answers as a walk of every name does: the
// same checkpoint, the same skipped failures, the same error, for Latest
// and LatestClean, over directories of damaged, compressed, error, final
// and rolling checkpoints, non-regular entries, files of a newer schema
// and names of no checkpoint.
//
//	go test -run '^$' -fuzz FuzzLatestWalkAgreesWithEveryName -fuzztime 2000x .
func FuzzLatestWalkAgreesWithEveryName(f *testing.F) {
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{1, 0, 0, 2, 0, 12, 2, 1, 0})            // step 3 damaged beside a final one
	f.Add([]byte{1, 0, 0, 5, 3, 0, 5, 2, 15})            // a rolling file newer than the steps, a truncated error
	f.Add([]byte{3, 0, 21, 2, 0, 24, 1, 4, 0})           // a directory, a newer schema, a junk name
	f.Add([]byte{0, 0, 0, 4, 2, 12, 4, 0, 13, 4, 1, 14}) // every checkpoint of the newest step damaged
	f.Add([]byte{5, 4, 1, 5, 4, 2, 5, 4, 3})             // names of no checkpoint only
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		dir := t.TempDir()
		writeFuzzedDirectory(t, dir, data)
		quiet := WithLogger(slog.New(slog.DiscardHandler))
		open := func(scan bool) *Store[int] {
			var s *Store[int]
			var err error
			if scan {
				s, err = Open[int](dir, ReadOnly(), quiet)
			} else {
				var b Backend
				if b, err = dirstore.Open(dir, dirstore.ReadOnly()); err == nil {
					s, err = OpenBackend[int](listOnly{b}, ReadOnly(), quiet)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		for _, want := range []func(fileName) bool{nil, func(fn fileName) bool { return fn.kind != KindError }} {
			keep := want
			if keep == nil {
				keep = func(fileName) bool { return true }
			}
			ref := open(true)
			wantR := result(walkEveryName(ref, ctx, "latest", keep, ref.loadEntry))
			for _, scan := range []bool{true, false} {
				s := open(scan)
				v, info, skipped, err := latestWalk(s, ctx, "latest", keep, s.loadEntry, nil)
				if got := result(v, info, skipped, err); !reflect.DeepEqual(got, wantR) {
					t.Fatalf("scan %v: latestWalk returned\n%+v\nwalking every name returns\n%+v", scan, got, wantR)
				}
			}
		}
	})
}
