package checkpoint

import (
	"context"
	"errors"
	"time"
)

// Hooks are functions the store calls after its operations, so that a host
// can emit events ("checkpoint created", "checkpoint restored") or metrics.
// Any field may be nil. Hooks run on the goroutine that called the store,
// after the operation is complete and outside the store's locks, so a hook
// may call the store (even Close) without deadlock; a slow hook slows that
// caller. The hooks of a save queued by an Async store run once it is
// published, on the goroutine that published it: the store's own, or a
// caller that was waiting on the queue (a Save finding it full, Flush,
// Close, another write); they may run concurrently with each other.
//
// A hook runs before the call that runs it returns. When Close returns, the
// store's goroutine has finished its hooks and Close has run those of the
// saves it published, so a hook may write what the caller of Close reads
// afterwards; the exception is a hook that calls Close itself, which goes on
// after that Close returns. The hooks of calls still running on other
// goroutines belong to those calls.
type Hooks struct {
	// OnSave is called after a checkpoint is durably saved. info.Size is its
	// size in bytes on disk.
	OnSave func(info Info)
	// OnLoad is called after Load, Latest or LatestClean returns a
	// checkpoint, with its age: the time since it was saved.
	OnLoad func(info Info, age time.Duration)
	// OnPrune is called with the checkpoints a retention pass removed (a
	// rule's, or a superseded error checkpoint, after a save, on Prune or
	// at a writer's Close).
	OnPrune func(removed []Info)
	// OnError is called with every error the store returns, except
	// ErrNotFound results and context cancellations, with every
	// checkpoint that Latest skipped because it did not load, and with the
	// failures of retention passes that a save or Close does not return.
	// The error is an *Error naming the operation, the step and the file.
	OnError func(err error)
}

// failed reports err to the logger and OnError and returns it.
func (s *Store[T]) failed(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A normal outcome (a fresh start) or the caller's own decision.
		s.cfg.logger.Debug("checkpoint: operation ended", "error", err)
		return err
	}
	s.cfg.logger.Warn("checkpoint: operation failed", "error", err)
	if s.cfg.hooks.OnError != nil {
		s.cfg.hooks.OnError(err)
	}
	return err
}

func (s *Store[T]) saved(info Info) {
	s.cfg.logger.Debug("checkpoint created", "step", info.Step, "kind", info.Kind, "path", info.Location, "size", info.Size)
	if s.cfg.hooks.OnSave != nil {
		s.cfg.hooks.OnSave(info)
	}
}

func (s *Store[T]) loaded(info Info) {
	age := s.cfg.now().Sub(info.Time)
	s.cfg.logger.Info("checkpoint restored", "step", info.Step, "kind", info.Kind, "path", info.Location, "age", age)
	if s.cfg.hooks.OnLoad != nil {
		s.cfg.hooks.OnLoad(info, age)
	}
}

func (s *Store[T]) prunedReport(removed []Info) {
	if len(removed) == 0 {
		return
	}
	for _, info := range removed {
		s.cfg.logger.Debug("checkpoint pruned", "step", info.Step, "kind", info.Kind, "path", info.Location)
	}
	if s.cfg.hooks.OnPrune != nil {
		s.cfg.hooks.OnPrune(removed)
	}
}
