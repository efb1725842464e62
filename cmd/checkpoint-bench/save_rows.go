package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gocheckpoint/checkpoint"
)

// largeSave compares a durable Save of the 1 MB state with the hand-written
// save: the row where what the envelope adds per byte (the checksum above
// all: see BENCHMARKS.md, "The checksum") would show.
func (b *bench) largeSave() ([]row, error) {
	world := b.worlds[b.cfg.mega]
	s, err := checkpoint.Open[World](b.subdir("save-1mb"))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	base, err := newBaseline(b.subdir("baseline-1mb"), "plain")
	if err != nil {
		return nil, err
	}
	ds, err := compare(b.cfg.rounds, max(1, b.cfg.perRound/2),
		func(i int) error { _, err := s.Save(b.ctx, int64(i), world); return err },
		func(i int) error { return base.save(i, world) })
	if err != nil {
		return nil, err
	}
	r := ratio(ds[0], ds[1])
	return []row{{
		what:    fmt.Sprintf("Save, plain, %s state, durable", sizeName(encodedSize(world))),
		result:  dur(ds[0]),
		against: "hand-written json + renameio + dir fsync: " + dur(ds[1]),
		ratio:   fmt.Sprintf("%.3f", r),
		target:  "≤ 0.80",
		met:     yesNo(r <= 0.80),
	}}, nil
}

// retention compares a durable Save under KeepLast(3), which prunes the
// oldest checkpoint after each save, with the hand-written save followed by
// the removal of its oldest file, on the small state (where a second
// directory fsync would weigh the most).
func (b *bench) retention() ([]row, error) {
	const keep = 3
	world := b.worlds[b.cfg.small]
	s, err := checkpoint.Open[World](b.subdir("keeplast"), checkpoint.KeepLast(keep))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	base, err := newBaseline(b.subdir("baseline-remove"), "plain")
	if err != nil {
		return nil, err
	}
	ds, err := compare(b.cfg.rounds, b.cfg.perRound,
		func(i int) error { _, err := s.Save(b.ctx, int64(i), world); return err },
		func(i int) error {
			if err := base.save(i, world); err != nil {
				return err
			}
			if i < keep {
				return nil
			}
			return os.Remove(filepath.Join(base.dir, fmt.Sprintf("state_%08d%s", i-keep, base.ext)))
		})
	if err != nil {
		return nil, err
	}
	list, err := s.List(b.ctx)
	if err != nil {
		return nil, err
	}
	if len(list) != keep {
		return nil, fmt.Errorf("KeepLast(%d) left %d checkpoints", keep, len(list))
	}
	r := ratio(ds[0], ds[1])
	return []row{{
		what:    fmt.Sprintf("Save with KeepLast(%d), plain, %s state, durable", keep, sizeName(b.cfg.small)),
		result:  dur(ds[0]),
		against: "hand-written save (json + renameio + dir fsync), then removing its oldest file: " + dur(ds[1]),
		ratio:   fmt.Sprintf("%.3f", r),
		target:  "≤ 1.05",
		met:     yesNo(r <= 1.05),
	}}, nil
}
