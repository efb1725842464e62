package checkpoint

import (
	"context"
	"io/fs"
	"slices"

	"github.com/gocheckpoint/checkpoint/storage"
)

// Leftovers are the files in a store's directory that belong to the store
// but are not checkpoints. Paths are the store's directory joined with the
// file's name, sorted.
type Leftovers struct {
	// Temps are temporary files of saves (".turn_007.json.ckpt-tmp-" and
	// random digits, or the same for a side file; in the older naming,
	// without the marker, ".turn_007.json" and digits). Beside a running
	// writer one may be a save in progress; with no writer, each was left by
	// a save that a crash interrupted, and the next writer's Open removes it.
	Temps []string
	// Quarantined are damaged checkpoints that a save moved aside
	// (turn_005.json.corrupt, turn_005.json.corrupt-2), and symbolic links
	// it found at a checkpoint's name and moved aside the same way, kept
	// for inspection. Nothing ever reads or removes them but RemoveLeftovers.
	Quarantined []string
	// Lock says whether a writer held the store's writer lock just after
	// Leftovers listed the directory, as far as the system shows without
	// taking the lock (which would make a writer starting meanwhile fail
	// with ErrLocked): if held, a temporary file may be that writer's save
	// in progress. If no holder is seen (LockNotSeen), each was left by a
	// save that a crash interrupted (a writer finishes its saves before it
	// lets go of the lock) unless a writer the system cannot show holds
	// it: the absence of a holder proves no writer is gone. Only a local
	// directory on Linux tells, from /proc/locks; elsewhere Lock is
	// LockUnknown. RemoveLeftovers leaves it zero.
	Lock LockState
	// LockHolder is the process that holds the lock, when Lock is
	// LockHeld and the system names it; else 0.
	LockHolder int
}

// A LockState says whether a store's writer lock is held (see
// storage.LockState).
type LockState = storage.LockState

const (
	// LockUnknown means the system cannot tell without taking the lock.
	LockUnknown = storage.LockUnknown
	// LockNotSeen means the system shows no holder of the lock. That is
	// no proof that none exists (see storage.LockNotSeen).
	LockNotSeen = storage.LockNotSeen
	// LockHeld means a writer, of this process or another, holds the lock.
	LockHeld = storage.LockHeld
)

// Leftovers lists the store's temporary files and quarantined checkpoints.
// It removes nothing and works on a ReadOnly store.
func (s *Store[T]) Leftovers(ctx context.Context) (Leftovers, error) {
	if err := s.begin(ctx); err != nil {
		return Leftovers{}, s.failed(opError("leftovers", s.dir, err))
	}
	defer s.ops.Done()
	temps, quarantined, err := s.leftovers(ctx)
	if err != nil {
		return Leftovers{}, s.failed(opError("leftovers", s.dir, err))
	}
	// The lock is looked at after the listing: a writer finishes its saves
	// before it lets go of the lock, so a temporary file listed while a
	// writer held it and still there once the lock is free was left by a
	// save that a crash interrupted.
	lock, holder := LockUnknown, 0
	if p, ok := storage.As[storage.LockProber](s.b); ok {
		lock, holder = p.LockState(ctx)
	}
	return Leftovers{Temps: s.paths(temps), Quarantined: s.paths(quarantined), Lock: lock, LockHolder: holder}, nil
}

// RemoveLeftovers removes the store's temporary files and quarantined
// checkpoints, syncs the directory and returns what it removed. It needs the
// writer lock, so no save of another process can be in progress, and it
// waits for this store's own saves: every temporary file it finds is stale.
// A quarantined checkpoint is evidence of damage: remove it once it has been
// looked at. On a ReadOnly store it returns ErrReadOnly.
func (s *Store[T]) RemoveLeftovers(ctx context.Context) (Leftovers, error) {
	if err := s.beginWrite(ctx); err != nil {
		return Leftovers{}, s.failed(opError("remove leftovers", s.dir, err))
	}
	defer s.endWrite()
	temps, quarantined, err := s.leftovers(ctx)
	if err == nil && len(temps)+len(quarantined) > 0 {
		_, err = s.b.Remove(ctx, slices.Concat(temps, quarantined)...)
	}
	if err != nil {
		return Leftovers{}, s.failed(opError("remove leftovers", s.dir, err))
	}
	for _, name := range slices.Concat(temps, quarantined) {
		s.cfg.logger.Debug("checkpoint: removed a leftover file", "path", s.path(name))
	}
	return Leftovers{Temps: s.paths(temps), Quarantined: s.paths(quarantined)}, nil
}

// leftovers returns the names of the temporary files and quarantined
// checkpoints of the store's layout, sorted.
func (s *Store[T]) leftovers(ctx context.Context) (temps, quarantined []string, err error) {
	objs, err := s.b.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objs {
		name := o.Name
		temp := s.cfg.layout.isTemp(s.b, name)
		stem, q := quarantinedStem(name)
		if q {
			_, q = s.cfg.layout.parse(stem)
		}
		if !temp && !q {
			continue
		}
		if o.Version == "" { // the listing did not say what it is
			if o, err = s.b.Stat(ctx, name); err != nil {
				continue // gone meanwhile, or unreadable: not ours to judge
			}
		}
		typ := o.Mode
		if typ.IsRegular() && temp {
			temps = append(temps, name)
			continue
		}
		// A symbolic link found at a checkpoint's name is moved aside
		// like a damaged file (the link, never its target).
		if q && (typ.IsRegular() || typ == fs.ModeSymlink) {
			quarantined = append(quarantined, name)
		}
	}
	slices.Sort(temps)
	slices.Sort(quarantined)
	return temps, quarantined, nil
}

func (s *Store[T]) paths(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = s.path(n)
	}
	return out
}
