package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint"
)

// encrypt measures what Encrypt costs, each time against the same store
// without it, interleaved: a durable Save of a 60 KB state, a Load of the
// 1 MB state, and the first List of a store of cfg.files checkpoints opened
// anew, from its header index and without one (every file's header read:
// for an encrypted file an X25519 unwrap, then its first chunk).
func (b *bench) encrypt() ([]row, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	enc := checkpoint.Encrypt(id)
	var rows []row
	for _, section := range []func(checkpoint.Option) ([]row, error){b.encryptedSave, b.encryptedLoad, b.encryptedList} {
		rs, err := section(enc)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}

// encryptedSave compares durable Saves of the 60 KB state, plain and
// encrypted.
func (b *bench) encryptedSave(enc checkpoint.Option) ([]row, error) {
	world := newWorld(b.cfg.sealedSave)
	plain, err := checkpoint.Open[World](b.subdir("save-plain"))
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	sealed, err := checkpoint.Open[World](b.subdir("save-encrypted"), enc)
	if err != nil {
		return nil, err
	}
	defer sealed.Close()
	ds, err := compare(b.cfg.rounds, b.cfg.perRound,
		func(i int) error { _, err := plain.Save(b.ctx, int64(i), world); return err },
		func(i int) error { _, err := sealed.Save(b.ctx, int64(i), world); return err })
	if err != nil {
		return nil, err
	}
	r := ratio(ds[1], ds[0])
	return []row{{
		what:    fmt.Sprintf("Save, encrypted, %s state, durable", sizeName(encodedSize(world))),
		result:  dur(ds[1]),
		against: "the same Save, plain: " + dur(ds[0]),
		ratio:   fmt.Sprintf("%.3f", r),
		target:  "≤ 1.10",
		met:     yesNo(r <= 1.10),
	}}, nil
}

// encryptedLoad compares Loads of the 1 MB state from a store of three
// checkpoints, plain and encrypted.
func (b *bench) encryptedLoad(enc checkpoint.Option) ([]row, error) {
	world := b.worlds[b.cfg.mega]
	open := func(name string, opts ...checkpoint.Option) (*checkpoint.Store[World], error) {
		dir := b.subdir(name)
		w, err := checkpoint.Open[World](dir, append(opts, checkpoint.NoSync())...)
		if err != nil {
			return nil, err
		}
		for step := int64(1); step <= 3; step++ {
			if _, err := w.Save(b.ctx, step, world); err != nil {
				w.Close()
				return nil, err
			}
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return checkpoint.Open[World](dir, append(opts, checkpoint.ReadOnly())...)
	}
	plain, err := open("load-plain")
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	sealed, err := open("load-encrypted", enc)
	if err != nil {
		return nil, err
	}
	defer sealed.Close()
	ds, err := compare(b.cfg.rounds, max(1, b.cfg.perRound/5),
		func(int) error { _, _, err := plain.Load(b.ctx, 2); return err },
		func(int) error { _, _, err := sealed.Load(b.ctx, 2); return err })
	if err != nil {
		return nil, err
	}
	r := ratio(ds[1], ds[0])
	return []row{{
		what:    fmt.Sprintf("Load, encrypted, %s state", sizeName(encodedSize(world))),
		result:  dur(ds[1]),
		against: "the same Load, plain: " + dur(ds[0]),
		ratio:   fmt.Sprintf("%.3f", r),
		target:  "≤ 1.20",
		met:     yesNo(r <= 1.20),
	}}, nil
}

// encryptedList compares the first List of a store opened anew on a
// directory of cfg.files checkpoints of the small state, plain and
// encrypted: from the header index the writer's Close left, then without
// it (a store whose writer was killed before it wrote one).
func (b *bench) encryptedList(enc checkpoint.Option) ([]row, error) {
	files := b.cfg.files
	world := b.worlds[b.cfg.small]
	fill := func(name string, opts ...checkpoint.Option) (string, error) {
		dir := b.subdir(name)
		w, err := checkpoint.Open[World](dir, append(opts, checkpoint.NoSync())...)
		if err != nil {
			return "", err
		}
		for step := 0; step < files; step++ {
			world.Turn = int64(step)
			if _, err := w.Save(b.ctx, int64(step), world); err != nil {
				w.Close()
				return "", err
			}
		}
		return dir, w.Close()
	}
	plainDir, err := fill("list-plain")
	if err != nil {
		return nil, err
	}
	sealedDir, err := fill("list-encrypted", enc)
	if err != nil {
		return nil, err
	}
	label := fmt.Sprintf("%d checkpoints", files)
	withIndex, err := b.firstListPair(plainDir, sealedDir, enc, b.cfg.coldLists)
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{plainDir, sealedDir} {
		if err := os.Remove(filepath.Join(dir, ".checkpoint.index")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	// ReadOnly stores write no index back: every List below reads every
	// header.
	noIndex, err := b.firstListPair(plainDir, sealedDir, enc, max(1, b.cfg.coldLists/2))
	if err != nil {
		return nil, err
	}
	r := ratio(withIndex[1], withIndex[0])
	return []row{{
		what:    "first List after Open, encrypted, " + label,
		result:  dur(withIndex[1]),
		against: "the same first List, plain: " + dur(withIndex[0]),
		ratio:   fmt.Sprintf("%.3f", r),
		target:  "≤ 1.5",
		met:     yesNo(r <= 1.5),
	}, {
		what:    "first List after Open, encrypted, without the header index, " + label,
		result:  dur(noIndex[1]),
		against: "the same first List, plain, without the header index: " + dur(noIndex[0]),
		ratio:   fmt.Sprintf("%.3f", ratio(noIndex[1], noIndex[0])),
		target:  "—",
		met:     "—",
	}}, nil
}

// firstListPair returns the median times of n first Lists of a ReadOnly
// store opened anew on plainDir and on sealedDir (with enc), alternating
// which goes first.
func (b *bench) firstListPair(plainDir, sealedDir string, enc checkpoint.Option, n int) ([2]time.Duration, error) {
	var out [2]time.Duration
	ds := make([][]time.Duration, 2)
	list := func(k int) error {
		dir, opts := plainDir, []checkpoint.Option{checkpoint.ReadOnly()}
		if k == 1 {
			dir, opts = sealedDir, append(opts, enc)
		}
		s, err := checkpoint.Open[World](dir, opts...)
		if err != nil {
			return err
		}
		start := time.Now()
		list, err := s.List(b.ctx)
		d := time.Since(start)
		s.Close()
		if err != nil {
			return err
		}
		if len(list) != b.cfg.files {
			return fmt.Errorf("%s: list found %d checkpoints, want %d", dir, len(list), b.cfg.files)
		}
		ds[k] = append(ds[k], d)
		return nil
	}
	for i := 0; i < n; i++ {
		for _, k := range [][2]int{{0, 1}, {1, 0}}[i%2] {
			if err := list(k); err != nil {
				return out, err
			}
		}
	}
	out[0], out[1] = median(ds[0]), median(ds[1])
	return out, nil
}
