// Package killtest runs kill -9 tests: a test starts its own test binary as
// a child process in a named role, lets it work until it has acknowledged
// some steps, kills it with SIGKILL (TerminateProcess on Windows), and then
// checks the promises the dead process made.
//
// # Writing a kill test
//
// A role is registered at package level. It runs in the child, and prints
// one line on its standard output per event; Ack prints the acknowledgement
// of a step, after which the step's promise must hold whatever happens:
//
//	var saver = killtest.Register("saver", func(c *killtest.Child) int {
//		s, err := checkpoint.Open[State](c.Args[0])
//		if err != nil {
//			c.Fail(2, err) // on standard error; the parent fails the test
//		}
//		for step := int64(1); ; step++ {
//			if _, err := s.Save(ctx, step, stateOf(step)); err != nil {
//				c.Fail(3, err)
//			}
//			c.Ack(step)
//		}
//	})
//
// The package's TestMain calls Dispatch first: in a child it runs the role
// and exits, in the test process it returns.
//
//	func TestMain(m *testing.M) {
//		killtest.Dispatch()
//		os.Exit(m.Run())
//	}
//
// The test starts the child, waits until it has acknowledged a number of
// steps that the test draws at random (from a seeded generator, so a failure
// can be replayed), kills it, and checks what it left:
//
//	p := saver.Start(t, dir)
//	p.AwaitAcks(t, 1+rng.IntN(20))
//	p.Kill(t)
//	require.Empty(t, p.Stderr())
//	acks := p.Acks() // every acknowledgement, those printed after the wait too
//	// open dir, check that Latest is at least the last of acks ...
//
// The kill lands while the child is busy with the step after the awaited
// acknowledgement, at an instant the scheduler decides: nothing sleeps to
// choose it, and nothing waits on time but a failure's timeout
// (Proc.Timeout). A test that must stop the child at an exact point makes it
// Pause there, and kills it or lets it go on (Proc.Resume).
//
// A child never outlives its test: its standard input is a pipe from the
// test process, and the child exits as soon as that pipe closes (when the
// test process ends, or calls Proc.Stop), unless the role asked to be told
// instead (Child.Stopping). Proc's cleanup kills a child still running when
// its test ends, and logs its output and standard error if the test failed.
//
// Tests that only need a second process (a contender for a lock, a program
// run to its end) use the same roles, Proc.Wait and Proc.Output. A test that
// re-runs a test function in a child under other conditions (another user, a
// seccomp filter, a broken backend) and reads its PASS or FAIL runs the
// binary with -test.run itself: the child's harness is then package testing.
//
// CHECKPOINT_KILLS sets how many kills each kill test makes (Kills). On
// Windows, Proc.Kill is TerminateProcess, which, as SIGKILL, gives the child
// no chance to run any code; where a test binary cannot start processes
// (js, wasip1), Command skips the test.
package killtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// roleEnv names the role a child runs; argsEnv holds its arguments, a
	// JSON array of strings.
	roleEnv = "KILLTEST_ROLE"
	argsEnv = "KILLTEST_ARGS"
	// KillsEnv is the environment variable that sets how many kills each
	// kill test makes (see Kills).
	KillsEnv = "CHECKPOINT_KILLS"
	// ackPrefix starts the line of an acknowledgement.
	ackPrefix = "ack "
)

// DefaultTimeout is how long Proc's waits last before they fail the test:
// a bound on a failure, never a synchronisation.
const DefaultTimeout = time.Minute

var (
	rolesMu sync.Mutex
	roles   = map[string]func(*Child) int{}
)

// A Role is a named function that a child process runs. Its zero value is
// not a role: roles come from Register.
type Role struct {
	name string
}

// Register registers run as the role name and returns it; call it in a
// package-level variable declaration, so that the role exists in the child
// before Dispatch runs. run's result is the child's exit status. Register
// panics if name is empty or already registered.
func Register(name string, run func(c *Child) int) Role {
	rolesMu.Lock()
	defer rolesMu.Unlock()
	if name == "" || roles[name] != nil {
		panic(fmt.Sprintf("killtest: role %q registered twice or empty", name))
	}
	roles[name] = run
	return Role{name: name}
}

// Name returns the role's name.
func (r Role) Name() string { return r.name }

// Dispatch runs the role this process was started in, if it is a child
// started by Proc.Start, and exits with the role's status; in any other
// process it returns at once. Call it first in TestMain.
func Dispatch() {
	name, ok := os.LookupEnv(roleEnv)
	if !ok {
		return
	}
	rolesMu.Lock()
	run := roles[name]
	rolesMu.Unlock()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "killtest:", err)
		os.Exit(100)
	}
	if run == nil {
		fail(fmt.Errorf("no role %q in this test binary", name))
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(argsEnv)), &args); err != nil {
		fail(fmt.Errorf("the arguments of role %q: %w", name, err))
	}
	// A child's own children must not take its role.
	os.Unsetenv(roleEnv)
	os.Unsetenv(argsEnv)
	c := &Child{Args: args, resume: make(chan struct{}, 16), stop: make(chan struct{})}
	go c.readInput()
	os.Exit(run(c))
}

// A Child is the running role's side of the protocol, in the child
// process. Its methods may be called from any goroutine.
type Child struct {
	// Args are the arguments the test passed to Start.
	Args []string

	mu      sync.Mutex
	claimed bool          // the role called Stopping
	resume  chan struct{} // a value per line the parent wrote
	stop    chan struct{} // closed at the end of the input, once claimed
}

// readInput passes each line of the standard input to Pause, and ends the
// child at the end of its input, or tells the role if it called Stopping.
func (c *Child) readInput() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		select {
		case c.resume <- struct{}{}:
		default: // more lines than pauses: not the protocol
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.claimed {
		os.Exit(0) // the test is gone, or stopped the child
	}
	close(c.stop)
}

// Ack prints the acknowledgement of v (a step, an ID) on the standard
// output: the line "ack " followed by v formatted with %v. Call it once the
// promise about v holds.
func (c *Child) Ack(v any) {
	fmt.Printf("%s%v\n", ackPrefix, v)
}

// Printf prints one line of output, an event other than an
// acknowledgement. The line must not start with "ack ".
func (c *Child) Printf(format string, args ...any) {
	fmt.Printf(strings.TrimSuffix(format, "\n")+"\n", args...)
}

// Pause prints the line of an event, as Printf does, and waits until the
// test lets the child go on (Proc.Resume) or kills it. If the test stops
// the child or is gone, the child exits with status 0.
func (c *Child) Pause(format string, args ...any) {
	c.Printf(format, args...)
	select {
	case <-c.resume:
	case <-c.stop:
		os.Exit(0)
	}
}

// Stopping returns a channel that is closed when the test stops the child
// (Proc.Stop) or is gone. A role that calls Stopping, before it does
// anything that could block, ends itself when the channel is closed; any
// other child exits with status 0 at that moment.
func (c *Child) Stopping() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimed = true
	return c.stop
}

// Fail prints err on the standard error and exits with code: the test sees
// a child that failed, not one it killed.
func (c *Child) Fail(code int, err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(code)
}

// A Proc is a child process running a role, seen from the test. Its
// methods are called from the test's goroutine.
type Proc struct {
	// Cmd is the child's command. Between Command and Start a test may set
	// its Env (Start adds the role's variables to it) and Dir; the
	// standard input, output and error belong to the Proc.
	Cmd *exec.Cmd
	// Timeout bounds each wait of Await, AwaitAcks and Next: past it, the
	// wait fails the test. It is DefaultTimeout unless the test sets it.
	Timeout time.Duration

	role   Role
	args   []string
	stdin  io.WriteCloser
	stderr bytes.Buffer // written by Cmd until it exits

	mu      sync.Mutex
	lines   []string
	ended   bool          // the output is at its end
	changed chan struct{} // closed, and replaced, on each line and at the end

	next   int           // Next's position in lines
	exited chan struct{} // closed once Cmd.Wait returned
	err    error         // Cmd.Wait's result
}

// Command returns the child that would run r with args, not started: a
// test adjusts p.Cmd, then calls p.Start. It skips the test where this
// platform cannot start processes.
func (r Role) Command(t testing.TB, args ...string) *Proc {
	t.Helper()
	if r.name == "" {
		t.Fatal("killtest: a Role not made by Register")
	}
	switch runtime.GOOS {
	case "js", "wasip1":
		t.Skipf("killtest: no child processes on %s", runtime.GOOS)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("killtest: cannot find the test binary to start: %v", err)
	}
	// -test.run=^$: a TestMain that forgot Dispatch runs no test in the
	// child, instead of the whole suite again.
	return &Proc{Cmd: exec.Command(exe, "-test.run=^$"), Timeout: DefaultTimeout, role: r, args: args}
}

// Start starts a child of the test binary running r with args; see Command
// and Proc.Start.
func (r Role) Start(t testing.TB, args ...string) *Proc {
	t.Helper()
	p := r.Command(t, args...)
	p.Start(t)
	return p
}

// Start starts the child. It fails the test if the child cannot start. The
// child's environment is Cmd.Env (the test's if nil) with the role and its
// arguments added, and GORACE's atexit_sleep_ms=0 (a race-enabled child
// that exits by itself would otherwise sleep a second). When the test ends,
// a child still running is killed; if the test failed, its output and
// standard error are logged.
func (p *Proc) Start(t testing.TB) {
	t.Helper()
	args, err := json.Marshal(p.args)
	if err != nil {
		t.Fatalf("killtest: %v", err)
	}
	env := p.Cmd.Env
	if env == nil {
		env = os.Environ()
	}
	p.Cmd.Env = append(env, roleEnv+"="+p.role.name, argsEnv+"="+string(args),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	p.Cmd.Stderr = &p.stderr
	if p.stdin, err = p.Cmd.StdinPipe(); err != nil {
		t.Fatalf("killtest: %v", err)
	}
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("killtest: %v", err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("killtest: starting role %s: %v", p.role.name, err)
	}
	p.changed = make(chan struct{})
	p.exited = make(chan struct{})
	go func() {
		p.read(stdout)
		// Wait only once the output is read to its end: Wait closes it.
		p.err = p.Cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if !p.hasExited() {
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("killtest: child %s %q (pid %d, %v) printed:\n%s\nstandard error:\n%s",
				p.role.name, p.args, p.Cmd.Process.Pid, p.err, strings.Join(p.Output(), "\n"), p.stderr.String())
		}
	})
}

// read collects the lines of the child's output until its end.
func (p *Proc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		p.mu.Lock()
		p.lines = append(p.lines, sc.Text())
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, stdout) // past a line too long to scan
	p.mu.Lock()
	p.ended = true
	close(p.changed)
	p.mu.Unlock()
}

func (p *Proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// waitUntil waits until done, called with the lines so far, returns true;
// it returns false if the output ended first.
// It fails the test after p.Timeout.
func (p *Proc) waitUntil(t testing.TB, what string, done func(lines []string) bool) bool {
	t.Helper()
	timeout := time.NewTimer(p.Timeout)
	defer timeout.Stop()
	for {
		p.mu.Lock()
		lines, ended, changed := p.lines, p.ended, p.changed
		p.mu.Unlock()
		if done(lines) {
			return true
		}
		if ended {
			return false
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("killtest: child %s printed no %s in %v; it printed %q", p.role.name, what, p.Timeout, lines)
		}
	}
}

// Await waits until the child has printed, in all, n lines that start with
// prefix (any n lines for ""), and returns those n lines. It fails the test
// if the child's output ends first or after p.Timeout.
func (p *Proc) Await(t testing.TB, prefix string, n int) []string {
	t.Helper()
	var got []string
	if !p.waitUntil(t, fmt.Sprintf("%d lines starting %q", n, prefix), func(lines []string) bool {
		got = got[:0]
		for _, l := range lines {
			if len(got) < n && strings.HasPrefix(l, prefix) {
				got = append(got, l)
			}
		}
		return len(got) == n
	}) {
		<-p.exited
		t.Fatalf("killtest: child %s ended (%v) having printed %d lines starting %q, want %d: %q\nstandard error:\n%s",
			p.role.name, p.err, len(got), prefix, n, p.Output(), p.stderr.String())
	}
	return got
}

// AwaitAcks waits until the child has acknowledged n things in all, and
// returns what it acknowledged: the first n payloads of Acks. It fails the
// test as Await does.
func (p *Proc) AwaitAcks(t testing.TB, n int) []string {
	t.Helper()
	lines := p.Await(t, ackPrefix, n)
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, ackPrefix)
	}
	return lines
}

// Next returns the next line of the child's output that Next has not
// returned, waiting for it; false once the output has ended and every line
// was returned. It fails the test after p.Timeout.
func (p *Proc) Next(t testing.TB) (string, bool) {
	t.Helper()
	if !p.waitUntil(t, "next line", func(lines []string) bool { return len(lines) > p.next }) {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	return p.lines[p.next-1], true
}

// Output returns the lines the child printed so far; after Kill or Wait,
// all of them.
func (p *Proc) Output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Count returns how many lines of Output start with prefix.
func (p *Proc) Count(prefix string) int {
	n := 0
	for _, l := range p.Output() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// Acks returns the payload of every acknowledgement in Output, in order.
func (p *Proc) Acks() []string {
	var acks []string
	for _, l := range p.Output() {
		if a, ok := Acked(l); ok {
			acks = append(acks, a)
		}
	}
	return acks
}

// Acked reports whether line is an acknowledgement, and returns its
// payload.
func Acked(line string) (payload string, ok bool) {
	return strings.CutPrefix(line, ackPrefix)
}

// Kill kills the child with SIGKILL (TerminateProcess on Windows), reads
// its output to the end (Output then holds what it printed before it died)
// and waits for it to exit. It returns the exit error (the child's death,
// unless it exited before the kill landed). It fails the test if the child
// had already exited when Kill was called: it failed on its own.
func (p *Proc) Kill(t testing.TB) error {
	t.Helper()
	if err := p.Cmd.Process.Kill(); err != nil {
		<-p.exited
		if errors.Is(err, os.ErrProcessDone) {
			t.Fatalf("killtest: child %s exited (%v) before it was killed; it printed %q\nstandard error:\n%s",
				p.role.name, p.err, p.Output(), p.stderr.String())
		}
		t.Fatalf("killtest: killing child %s: %v", p.role.name, err)
	}
	<-p.exited
	return p.err
}

// Signal sends sig to the child (SIGSTOP and SIGCONT, say, on Unix).
func (p *Proc) Signal(sig os.Signal) error {
	return p.Cmd.Process.Signal(sig)
}

// Wait waits for the child to exit by itself and returns its exit error;
// Output then holds all it printed.
func (p *Proc) Wait() error {
	<-p.exited
	return p.err
}

// Resume lets a child paused in Child.Pause go on. It fails the test if
// the child is gone.
func (p *Proc) Resume(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		t.Fatalf("killtest: resuming child %s: %v", p.role.name, err)
	}
}

// Stop closes the child's standard input: a child that called
// Child.Stopping ends itself, any other exits with status 0.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	if err := p.stdin.Close(); err != nil {
		t.Fatalf("killtest: stopping child %s: %v", p.role.name, err)
	}
}

// Pid returns the child's process ID.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Stderr returns what the child printed on its standard error, once it has
// exited (it waits for that).
func (p *Proc) Stderr() string {
	<-p.exited
	return p.stderr.String()
}

// Kills returns how many kills a kill test makes: the value of
// CHECKPOINT_KILLS, or def if it is unset. It fails the test if the value
// is not a number.
func Kills(t testing.TB, def int) int {
	t.Helper()
	v := os.Getenv(KillsEnv)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("killtest: %s: %v", KillsEnv, err)
	}
	return n
}
