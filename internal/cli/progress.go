package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal: where a progress bar can be
// redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Progress on stderr. On a terminal, a bar redrawn in place, at most
// barRate times a second, and erased when the work ends, so that what the
// command prints after it reads as without it; elsewhere (a log, a pipe),
// with lines set, a line each time another tenth of the work is done, and
// nothing for work of fewer than linesFrom items, which is quick.
const (
	barRate   = 10
	barWidth  = 24
	linesFrom = 100
)

// meter shows the progress of one command's work on w. The zero meter
// (and a nil one) shows nothing. Its methods are safe for concurrent use.
type meter struct {
	w     io.Writer
	what  string // the command, which starts each line
	unit  string // of the items counted: "files", "checkpoints"
	tty   bool   // a bar; otherwise lines
	lines bool   // lines where there is no terminal
	now   func() time.Time

	mu      sync.Mutex
	start   time.Time
	last    time.Time // of the last redraw
	drawn   int       // the length of the bar drawn, to erase it
	tenths  int       // the tenths of the work reported in lines
	done    int
	total   int
	bytes   int64
	stopped bool
}

// newMeter returns the meter of the command c on its stderr: a bar if
// stderr is a terminal, otherwise lines if lines, otherwise nothing; and
// nothing at all if quiet.
func (c *cli) newMeter(unit string, lines, quiet bool) *meter {
	if quiet {
		return nil
	}
	m := &meter{w: c.stderr, what: "checkpoint " + c.cmd, unit: unit, tty: c.stderrTTY, lines: lines, now: time.Now}
	if !m.tty && !m.lines {
		return nil
	}
	return m
}

// set records that done of total items are done, and bytes read or
// written (negative: not counted), and shows it if it is time to.
func (m *meter) set(done, total int, bytes int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	now := m.now()
	if m.start.IsZero() {
		m.start = now
	}
	m.done, m.total, m.bytes = done, total, bytes
	if m.tty {
		if done < total && now.Sub(m.last) < time.Second/barRate {
			return
		}
		m.last = now
		m.draw(now)
		return
	}
	if total < linesFrom || total <= 0 {
		return
	}
	if t := done * 10 / total; t > m.tenths {
		m.tenths = t
		fmt.Fprintf(m.w, "%s: %s\n", m.what, m.status(now))
	}
}

// status says how far the work is: "1234/10000 files (12%), 3.4 MiB, 512
// files/s".
func (m *meter) status(now time.Time) string {
	s := fmt.Sprintf("%d/%d %s (%d%%)", m.done, m.total, m.unit, percent(m.done, m.total))
	if m.bytes >= 0 {
		s += ", " + size(m.bytes, false)
	}
	if el := now.Sub(m.start); el >= time.Second {
		s += fmt.Sprintf(", %.0f %s/s", float64(m.done)/el.Seconds(), m.unit)
	}
	return s
}

// draw redraws the bar in place.
func (m *meter) draw(now time.Time) {
	fill := 0
	if m.total > 0 {
		fill = min(barWidth, m.done*barWidth/m.total)
	}
	line := fmt.Sprintf("\r%s [%s%s] %s", m.what, strings.Repeat("=", fill), strings.Repeat(" ", barWidth-fill), m.status(now))
	pad := max(0, m.drawn-len(line))
	fmt.Fprint(m.w, line+strings.Repeat(" ", pad))
	m.drawn = len(line)
}

// clear erases the bar, for a line that the command prints on the
// terminal; the next set draws it again.
func (m *meter) clear() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.erase()
	m.last = time.Time{}
}

// erase erases the bar drawn, if any.
func (m *meter) erase() {
	if m.tty && m.drawn > 0 {
		// Spaces rather than an escape sequence: every terminal,
		// Windows' console included, erases with them.
		fmt.Fprint(m.w, "\r"+strings.Repeat(" ", m.drawn)+"\r")
		m.drawn = 0
	}
}

// stop ends the meter: a bar is erased (the command's report follows on
// stdout or its errors on stderr), lines say nothing more.
func (m *meter) stop() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	m.stopped = true
	m.erase()
}

func percent(done, total int) int {
	if total <= 0 {
		return 100
	}
	return done * 100 / total
}
