package testkit

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gocheckpoint/checkpoint/backendtest/inject"
)

// ErrInjected is the failure a FaultSwitch injects.
var ErrInjected = errors.New("injected fault")

// FaultSwitch fails the first operation at one point once armed, and no
// other until it is armed again. Its Fault is a fault function of the
// directory's test seam (dirstore's SetFault), its Op one of inject.Wrap;
// both may be given to one store. It is safe for concurrent use.
type FaultSwitch struct {
	mu    sync.Mutex
	point string
	hits  int
}

// Arm makes the next operation at point fail.
func (f *FaultSwitch) Arm(point string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.point, f.hits = point, 0
}

// Fault fails the first call at the armed point with an error that names
// the point and the file and wraps ErrInjected.
func (f *FaultSwitch) Fault(point, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.point != point || f.hits > 0 {
		return nil
	}
	f.hits++
	return fmt.Errorf("%s %s: %w", point, name, ErrInjected)
}

// Op fails a Remove of a backend wrapped by inject.Wrap as the point
// "remove", once armed: a removal is a whole Backend operation.
func (f *FaultSwitch) Op(o inject.Op) error {
	if o.Kind != inject.Remove {
		return nil
	}
	return f.Fault("remove", o.Name)
}
