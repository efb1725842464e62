package dirstore

import (
	"errors"
	"sync"
	"sync/atomic"
)

// aheadMin is the size of a directory's last write from which its next
// write creates its temporary file ahead (fileIO.ahead). A goroutine
// started for it runs 15-90 µs later on a 2-core VM (the other core's
// thread has to wake up), about the time encoding/json takes for 16 KB,
// so below that it would come too late and only cost its start; an
// envelope of a 10 KB state (or of a 100 KB state gzipped: 28 KB) is on
// either side of it.
const aheadMin = 16 << 10

// pendingMax bounds what a write may hand to its temporary file before the
// file exists: up to this many bytes are held in memory while the file is
// being created; a write beyond them waits for it.
const pendingMax = 1 << 20

var pendingBuffers = sync.Pool{New: func() any { return new([]byte) }}

// pendingTemp is a write's temporary file while it is being created. Ahead,
// the creation runs on a goroutine of its own, beside the write function,
// which for a large state is still encoding it: on a file system where
// creating a file is dear (ext4 without a journal after many removals: 0.1-1
// ms of the kernel's time) the two overlap. What the write function writes
// before the file exists is held (at most pendingMax bytes) and written
// first once it does. Whichever of the goroutine and the writer comes first
// creates the file (claimed), so that a write that needs the file at once
// does not wait for a goroutine to be scheduled, and a write that fails
// before the goroutine began creates none. A creation that fails ahead
// fails the write once the write function has returned: the function runs
// all the same (a stream it reads is read for nothing). The writer's calls
// are not concurrent.
type pendingTemp struct {
	create  func() (tempFile, string, error)
	claimed atomic.Bool
	done    chan struct{} // closed once the file is created or has failed

	f   tempFile // set with tmp or err before done is closed
	tmp string
	err error

	ready bool    // the writer has the file and has written what was held
	held  *[]byte // what was written before the file existed
	werr  error   // a failed write of what was held: every later Write's
}

// startTemp starts creating a temporary file with create: on a goroutine
// if ahead, otherwise at once.
func startTemp(create func() (tempFile, string, error), ahead bool) *pendingTemp {
	p := &pendingTemp{create: create, done: make(chan struct{})}
	if !ahead {
		p.claimed.Store(true)
		p.run()
		return p
	}
	go func() {
		if p.claimed.CompareAndSwap(false, true) {
			p.run()
		}
	}()
	return p
}

func (p *pendingTemp) run() {
	p.f, p.tmp, p.err = p.create()
	close(p.done)
}

// created waits for the creation, making it here if the goroutine has not
// begun it, and returns its outcome.
func (p *pendingTemp) created() (tempFile, string, error) {
	if p.claimed.CompareAndSwap(false, true) {
		p.run()
	}
	<-p.done
	return p.f, p.tmp, p.err
}

// settle is created, for a write whose function has returned: if it
// failed and the creation has not begun, the creation never will, and
// settle returns errAbandoned. The held bytes' buffer goes back once the
// write failed.
func (p *pendingTemp) settle(failed bool) (tempFile, string, error) {
	if failed {
		p.release()
		if p.claimed.CompareAndSwap(false, true) {
			p.err = errAbandoned
			close(p.done)
		}
	}
	return p.created()
}

// errAbandoned is the outcome of a creation that settle stopped before it
// began.
var errAbandoned = errors.New("temporary file not created: the write failed first")

// Write holds p while the file is being created and there is room,
// otherwise writes it to the file (after what was held).
func (p *pendingTemp) Write(b []byte) (int, error) {
	if p.werr != nil {
		return 0, p.werr
	}
	if !p.ready {
		select {
		case <-p.done:
		default:
			if p.held == nil {
				p.held = pendingBuffers.Get().(*[]byte)
			}
			if len(*p.held)+len(b) <= pendingMax {
				*p.held = append(*p.held, b...)
				return len(b), nil
			}
		}
		if err := p.file(); err != nil {
			return 0, err
		}
	}
	return p.f.Write(b)
}

// file waits for the temporary file and writes what was held to it. Once
// that failed, it fails again.
func (p *pendingTemp) file() error {
	if p.ready {
		return p.werr
	}
	if _, _, err := p.created(); err != nil {
		p.release()
		return err
	}
	p.ready = true
	if p.held != nil {
		_, p.werr = p.f.Write(*p.held)
		p.release()
	}
	return p.werr
}

// release returns the held bytes' buffer.
func (p *pendingTemp) release() {
	if p.held != nil {
		*p.held = (*p.held)[:0]
		pendingBuffers.Put(p.held)
		p.held = nil
	}
}
