package cli

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gocheckpoint/checkpoint"
	ckptnames "github.com/gocheckpoint/checkpoint/internal/names"
)

var serveCommand = command{
	name:    "serve",
	args:    "[--addr HOST:PORT] [--write] DIR",
	summary: "serve a local web page to browse a store or a root of sessions: timeline, states, diffs, forks",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		addr := fs.String("addr", "127.0.0.1:0", "listen on `HOST:PORT`; port 0 picks a free port")
		write := fs.Bool("write", false, "allow forking a session from a step (without it the server never writes)")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			t, err := c.oneDir(ctx, args, *layout)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.serve(ctx, t, *addr, *write)
		}
	},
}

// webFiles are the page's files: index.html, app.js and app.css.
//
//go:embed web
var webFiles embed.FS

// server serves the page and its API for one target. Every read goes
// through the same layer as the other commands (target.open, openAnySchema,
// cli.load, diffStates); the only write is a fork, with --write.
type server struct {
	c     *cli
	t     target
	write bool

	token  string // required by every request, in ?token= or the cookie
	csrf   string // required by every POST, in X-Checkpoint-CSRF
	cookie string // the cookie's name, unique to the port
	origin string // http://HOST:PORT, the address the printed URL names
	// The Host a request may name (see allowedHost): the port, whether
	// any IP address goes (a server not on loopback), and the host name
	// of --addr, if it was given one.
	port  string
	anyIP bool
	name  string

	root *checkpoint.Sessions // read-only, for a root of sessions
	// known are the sessions of root as last listed, by stored name.
	knownMu sync.Mutex
	known   map[string]checkpoint.Session
	states  stateCache
	stores  storeCache
	checks  checker
	stop    context.CancelFunc // stops the checker
	wg      sync.WaitGroup

	// busy counts the API requests being answered: the checker waits
	// while there are any, so that it never slows the page down.
	busyMu sync.Mutex
	busy   int
	idle   *sync.Cond
}

// enter and leave bracket an API request.
func (s *server) enter() {
	s.busyMu.Lock()
	s.busy++
	s.busyMu.Unlock()
}

func (s *server) leave() {
	s.busyMu.Lock()
	if s.busy--; s.busy == 0 {
		s.idle.Broadcast()
	}
	s.busyMu.Unlock()
}

// waitIdle waits until no API request is being answered, or ctx is done.
func (s *server) waitIdle(ctx context.Context) {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	for s.busy > 0 && ctx.Err() == nil {
		s.idle.Wait()
	}
}

// checker verifies in the background the checkpoints a timeline lists,
// one store's batch at a time, so that the timeline marks every damaged
// file, not only those whose header does not read. A file is never
// modified (the rolling file is replaced, under another cacheKey), so a
// verdict is kept for the server's life.
type checker struct {
	mu      sync.Mutex
	results map[cacheKey]verdict
	pending map[string]bool // the stores with a batch queued or running
	jobs    chan checkJob
}

type checkJob struct {
	key   string
	infos []checkpoint.Info
}

// A verdict is what reading a file in full found: nothing (a good file),
// damage, or no key to read it with (see keyProblem), which is no damage.
type verdict struct {
	damaged, noKey string
}

func (v verdict) good() bool { return v == verdict{} }

// verdict returns what the checker found of info, if it checked it.
func (c *checker) verdict(info checkpoint.Info) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.results[keyOf(info)]
	return r, ok
}

// record keeps the verdict on info: err is what reading it in full
// returned. Only a verdict on the file itself is kept, never a failure to
// reach it.
func (c *checker) record(info checkpoint.Info, err error) {
	var v verdict
	switch {
	case err == nil, errors.Is(err, checkpoint.ErrNewerSchema):
	case keyProblem(err) != "":
		v.noKey = keyProblem(err)
	case errors.Is(err, checkpoint.ErrCorrupt):
		v.damaged = reason(err)
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.results == nil {
		c.results = make(map[cacheKey]verdict)
	}
	c.results[keyOf(info)] = v
}

// enqueue queues the check of infos of the store key, unless a batch of
// that store is queued or running.
func (c *checker) enqueue(key string, infos []checkpoint.Info) {
	if len(infos) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[key] {
		return
	}
	select {
	case c.jobs <- checkJob{key: key, infos: infos}:
		if c.pending == nil {
			c.pending = make(map[string]bool)
		}
		c.pending[key] = true
	default: // busy: the next request of the timeline asks again
	}
}

// runChecks verifies the batches queued until ctx is done.
func (s *server) runChecks(ctx context.Context) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-s.checks.jobs:
			s.check(ctx, job)
			s.checks.mu.Lock()
			delete(s.checks.pending, job.key)
			s.checks.mu.Unlock()
		}
	}
}

func (s *server) check(ctx context.Context, job checkJob) {
	st, _, _, release, err := s.openStore(ctx, job.key)
	if err != nil {
		return
	}
	defer release()
	for _, info := range job.infos {
		s.waitIdle(ctx)
		if ctx.Err() != nil {
			return
		}
		s.checks.record(info, verifyCheckpoint(ctx, st, info))
	}
}

// serve listens on addr, prints the page's URL on stdout and serves until
// ctx is done.
func (c *cli) serve(ctx context.Context, t target, addr string, write bool) error {
	if t.empty && !t.sessions {
		return &checkpoint.Error{Op: "serve", Path: t.dir, Err: fmt.Errorf("%w: no checkpoint files (layout %s); give --layout if they have another name", checkpoint.ErrNotFound, t.layout)}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	s, err := newServer(ctx, c, t, write, addr, ln.Addr().(*net.TCPAddr))
	if err != nil {
		ln.Close()
		return err
	}
	defer s.close()
	hs := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	host := ln.Addr().(*net.TCPAddr)
	if host.IP.IsUnspecified() {
		c.notef("listening on every interface (%s): anyone who can reach this machine and has the URL's token can read these checkpoints (at http://IP:%d/ and the token)", ln.Addr(), host.Port)
	} else if !host.IP.IsLoopback() {
		c.notef("listening on %s, not on a loopback address: anyone who can reach it and has the URL's token can read these checkpoints", ln.Addr())
	}
	fmt.Fprintf(c.stdout, "checkpoint serve: %s/?token=%s\n", s.origin, s.token)
	if write {
		c.notef("--write: the page can fork sessions")
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shut)
		<-done
		return nil
	}
}

func newServer(ctx context.Context, c *cli, t target, write bool, given string, addr *net.TCPAddr) (*server, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	s := &server{c: c, t: t, write: write, token: base64.RawURLEncoding.EncodeToString(raw[:])}
	mac := hmac.New(sha256.New, raw[:])
	mac.Write([]byte("checkpoint serve csrf"))
	s.csrf = base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	port := strconv.Itoa(addr.Port)
	s.cookie = "checkpoint_token_" + port
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	s.origin = "http://" + net.JoinHostPort(host, port)
	s.port, s.anyIP = port, !addr.IP.IsLoopback()
	if h, _, err := net.SplitHostPort(given); err == nil && net.ParseIP(h) == nil {
		s.name = strings.ToLower(h) // --addr myhost:8080: the name the user chose
	}
	if t.sessions {
		root, err := t.openSessions(ctx, t.options(checkpoint.ReadOnly())...)
		if err != nil {
			return nil, err
		}
		s.root = root
	}
	s.checks.jobs = make(chan checkJob, 64)
	s.idle = sync.NewCond(&s.busyMu)
	ctx, s.stop = context.WithCancel(ctx)
	// A waitIdle wakes up when ctx is done.
	context.AfterFunc(ctx, func() {
		s.busyMu.Lock()
		s.idle.Broadcast()
		s.busyMu.Unlock()
	})
	s.wg.Add(1)
	go s.runChecks(ctx)
	return s, nil
}

// close stops the checker and closes what the server opened.
func (s *server) close() {
	s.stop()
	s.wg.Wait()
	s.stores.closeAll()
	if s.root != nil {
		s.root.Close()
	}
}

// handler returns the server's routes behind its guard.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /static/{name}", s.static)
	mux.HandleFunc("GET /api/info", s.api(s.info))
	mux.HandleFunc("GET /api/sessions", s.api(s.sessions))
	mux.HandleFunc("GET /api/timeline", s.api(s.timeline))
	mux.HandleFunc("GET /api/checkpoint", s.api(s.checkpoint))
	mux.HandleFunc("GET /api/node", s.api(s.node))
	mux.HandleFunc("GET /api/search", s.api(s.search))
	mux.HandleFunc("GET /api/diff", s.api(s.diff))
	mux.HandleFunc("POST /api/fork", s.api(s.fork))
	mux.HandleFunc("/api/", s.api(s.noRoute))
	return s.guard(mux)
}

// apiRoutes are the API's paths and the method each takes.
var apiRoutes = map[string]string{
	"/api/info": "GET", "/api/sessions": "GET", "/api/timeline": "GET", "/api/checkpoint": "GET",
	"/api/node": "GET", "/api/search": "GET", "/api/diff": "GET", "/api/fork": "POST",
}

// noRoute answers a request to no API route, or with the wrong method,
// with an API error.
func (s *server) noRoute(r *http.Request) (any, error) {
	if m, ok := apiRoutes[r.URL.Path]; ok {
		return nil, &apiError{status: http.StatusMethodNotAllowed, kind: "bad_request", err: fmt.Errorf("%s takes %s, not %s", r.URL.Path, m, r.Method)}
	}
	return nil, &apiError{status: http.StatusNotFound, kind: "not_found", err: fmt.Errorf("no API route %s", r.URL.Path)}
}

// guard sets the security headers of every response and lets through only
// requests to one of the server's host names that carry the token.
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !s.allowedHost(r.Host) {
			// DNS rebinding: a page of another site whose name now
			// resolves to this machine.
			refuse(w, http.StatusForbidden, "this server answers only requests to "+s.origin)
			return
		}
		if !s.authorized(r) {
			refuse(w, http.StatusForbidden, "a token is required: open the URL that checkpoint serve printed, with its ?token=")
			return
		}
		if q := r.URL.Query().Get("token"); q != "" {
			http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		}
		next.ServeHTTP(w, r)
	})
}

// allowedHost reports whether a request may name hostport as its Host (or
// come from a page of that origin): the server's port, and localhost, a
// loopback address, the host name --addr gave, or, for a server not on
// loopback, any IP address. Never another name: a page of another site
// whose name was made to resolve to this machine (DNS rebinding) is
// refused.
func (s *server) allowedHost(hostport string) bool {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil || p != s.port {
		return false
	}
	h = strings.ToLower(h)
	if h == "localhost" || s.name != "" && h == s.name {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && (s.anyIP || ip.IsLoopback())
}

// authorized reports whether r carries the token, in its URL or cookie.
func (s *server) authorized(r *http.Request) bool {
	given := r.URL.Query().Get("token")
	if given == "" {
		if ck, err := r.Cookie(s.cookie); err == nil {
			given = ck.Value
		}
	}
	return subtle.ConstantTimeCompare([]byte(given), []byte(s.token)) == 1
}

// refuse answers with a short plain-text page.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, "checkpoint serve: %s\n", msg)
}

func (s *server) page(w http.ResponseWriter, r *http.Request) {
	b, err := webFiles.ReadFile("web/index.html")
	if err != nil {
		refuse(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

func (s *server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}
	ctype, ok := types[path.Ext(name)]
	b, err := webFiles.ReadFile("web/" + name)
	if !ok || err != nil || strings.Contains(name, "/") {
		refuse(w, http.StatusNotFound, "no such file")
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Write(b)
}

// apiError is an error the API reports as {"error": ..., "kind": ...}
// with an HTTP status.
type apiError struct {
	status int
	kind   string
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, kind: "bad_request", err: fmt.Errorf(format, args...)}
}

// classify maps an error of the reading layer to a status and a kind.
func classify(err error) (int, string) {
	var ae *apiError
	var ue usageError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.kind
	case errors.As(err, &ue), errors.Is(err, checkpoint.ErrInvalid):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, checkpoint.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, checkpoint.ErrNoKey), errors.Is(err, checkpoint.ErrPlaintext):
		return http.StatusUnprocessableEntity, "no_key"
	case errors.Is(err, checkpoint.ErrCorrupt):
		return http.StatusUnprocessableEntity, "damaged"
	case errors.Is(err, checkpoint.ErrNewerSchema):
		return http.StatusUnprocessableEntity, "newer_schema"
	case errors.Is(err, checkpoint.ErrLocked):
		return http.StatusConflict, "locked"
	}
	return http.StatusBadGateway, "storage"
}

// api adapts a handler that returns a value to encode as JSON. A GET's
// answer carries an ETag, so that the page's polling is answered 304 while
// nothing changed.
func (s *server) api(h func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := func() (any, error) {
			s.enter()
			defer s.leave()
			return h(r)
		}()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if err != nil {
			code, kind := classify(err)
			msg := err.Error()
			if hint := s.c.keyHint(err); hint != "" {
				msg += "; " + hint
			}
			b, _ := json.Marshal(map[string]string{"error": msg, "kind": kind})
			w.WriteHeader(code)
			w.Write(b)
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			b, _ = json.Marshal(map[string]string{"error": err.Error(), "kind": "storage"})
			w.Write(b)
			return
		}
		if r.Method == http.MethodGet {
			sum := sha256.Sum256(b)
			etag := `"` + hex.EncodeToString(sum[:12]) + `"`
			w.Header().Set("ETag", etag)
			if r.Header.Get("If-None-Match") == etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		w.Write(b)
	}
}

type infoJSON struct {
	Location string `json:"location"`
	Root     string `json:"root"`
	Write    bool   `json:"write"`
	CSRF     string `json:"csrf"`
}

func (s *server) info(*http.Request) (any, error) {
	root := "store"
	if s.t.sessions {
		root = "sessions"
	}
	return infoJSON{Location: s.t.dir, Root: root, Write: s.write && s.t.sessions, CSRF: s.csrf}, nil
}

// webSession is a session as the API sends it: as ls --json prints it,
// with the name the API knows it by.
type webSession struct {
	Key string `json:"key"`
	sessionJSON
}

func newWebSession(sess checkpoint.Session) webSession {
	return webSession{Key: storedName(sess.Dir), sessionJSON: toSessionJSON(sess)}
}

// storedName returns the last element of a session's Dir: the name its
// store has in the root.
func storedName(dir string) string {
	return path.Base(strings.TrimRight(filepath.ToSlash(dir), "/"))
}

func (s *server) sessions(r *http.Request) (any, error) {
	if s.root == nil {
		return nil, badRequest("%s is a store, not a root of sessions", s.t.dir)
	}
	list, err := s.root.List(r.Context())
	if err != nil {
		return nil, err
	}
	s.remember(list)
	out := make([]webSession, 0, len(list))
	for _, sess := range list {
		out = append(out, newWebSession(sess))
	}
	return map[string]any{"sessions": out}, nil
}

// storeDir returns the store the API names by key: "" for the target
// itself when it is a store; in a root, the store of a session the root
// lists (never another directory or a symbolic link in the root, which
// the root does not list as a session).
func (s *server) storeDir(ctx context.Context, key string) (string, error) {
	if !s.t.sessions {
		if key != "" {
			return "", badRequest("%s is a store, not a root of sessions: no session %q", s.t.dir, key)
		}
		return s.t.dir, nil
	}
	if _, ok, err := s.lookupSession(ctx, key); err != nil {
		return "", err
	} else if !ok {
		return "", &apiError{status: http.StatusNotFound, kind: "not_found", err: fmt.Errorf("%s: no session stored as %q", s.t.dir, key)}
	}
	return joinName(s.t.dir, key), nil
}

// lookupSession returns the session of the root stored as key, as the
// root last listed it; a key not in that listing lists the root again.
func (s *server) lookupSession(ctx context.Context, key string) (checkpoint.Session, bool, error) {
	s.knownMu.Lock()
	sess, ok := s.known[key]
	s.knownMu.Unlock()
	if ok {
		return sess, true, nil
	}
	if !ckptnames.IsSessionName(key) {
		return checkpoint.Session{}, false, nil
	}
	list, err := s.root.List(ctx)
	if err != nil {
		return checkpoint.Session{}, false, err
	}
	s.remember(list)
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	sess, ok = s.known[key]
	return sess, ok, nil
}

// remember keeps list, a listing of the root, for lookupSession.
func (s *server) remember(list []checkpoint.Session) {
	known := make(map[string]checkpoint.Session, len(list))
	for _, sess := range list {
		known[storedName(sess.Dir)] = sess
	}
	s.knownMu.Lock()
	s.known = known
	s.knownMu.Unlock()
}

// verdict says why the header of the file at p did not read.
func (h *headerErrors) verdict(p string) verdict {
	if err := h.of(p); err != nil {
		if k := keyProblem(err); k != "" {
			return verdict{noKey: k}
		}
		return verdict{damaged: reason(err)}
	}
	return verdict{damaged: "unreadable header"}
}

// openStore opens the store named by key read-only, with rules (retention
// options for a dry run), and lists it. release gives the store back: a
// store opened without rules is kept open for the next request (its List
// then reads only the headers of files new or changed since), one with
// rules is closed.
func (s *server) openStore(ctx context.Context, key string, rules ...checkpoint.Option) (st *checkpoint.Store[json.RawMessage], infos []checkpoint.Info, herrs *headerErrors, release func(), err error) {
	dir, err := s.storeDir(ctx, key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	open := func() (*checkpoint.Store[json.RawMessage], []checkpoint.Info, *headerErrors, error) {
		herrs := &headerErrors{}
		opts := s.t.options(append([]checkpoint.Option{checkpoint.ReadOnly(), checkpoint.WithLogger(slog.New(herrs))}, rules...)...)
		st, infos, err := openAnySchema(ctx, s.t, dir, -1, opts...)
		return st, infos, herrs, err
	}
	if len(rules) > 0 || !keepStoresOpen {
		st, infos, herrs, err := open()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		return st, infos, herrs, func() { st.Close() }, nil
	}
	if e := s.stores.acquire(key); e != nil {
		infos, err := e.st.List(ctx)
		if err != nil && ctx.Err() != nil {
			s.stores.release(e) // the request went away, not the store
			return nil, nil, nil, nil, err
		}
		if err == nil && maxSchemaOf(infos) <= e.schema {
			return e.st, infos, e.herrs, func() { s.stores.release(e) }, nil
		}
		// A file of a newer schema than the store was opened to read, or
		// a store that fails (removed, say): open it afresh.
		s.stores.drop(e)
	}
	st, infos, herrs, err = open()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// Another request may have opened the store meanwhile: add keeps one.
	e := s.stores.add(key, &openStore{st: st, herrs: herrs, schema: maxSchemaOf(infos)})
	return e.st, infos, e.herrs, func() { s.stores.release(e) }, nil
}

// maxSchemaOf returns the highest schema of infos, as openAnySchema
// opens a store to read.
func maxSchemaOf(infos []checkpoint.Info) int {
	m := 0
	for _, info := range infos {
		m = max(m, min(info.Schema, maxSchema))
	}
	return m
}

// openStore is a store the server keeps open between requests.
type openStore struct {
	key     string
	st      *checkpoint.Store[json.RawMessage]
	herrs   *headerErrors
	schema  int // the highest schema it reads
	refs    int // requests using it
	dropped bool
}

// storeCache keeps the stores the page looked at most recently open, at
// most maxOpenStores of them; one dropped while a request uses it is
// closed when that request is done.
type storeCache struct {
	mu   sync.Mutex
	open []*openStore // the most recently used last
}

const maxOpenStores = 16

// keepStoresOpen: on Windows a store kept open would keep its directory
// from being removed (checkpoint sessions rm beside the server) or
// renamed; there every request opens the stores it reads.
const keepStoresOpen = runtime.GOOS != "windows"

func (c *storeCache) acquire(key string) *openStore {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.open {
		if e.key == key {
			c.open = append(append(c.open[:i:i], c.open[i+1:]...), e)
			e.refs++
			return e
		}
	}
	return nil
}

// add adds e, acquired, unless a store of its key was added meanwhile:
// then e is closed and that one is acquired.
func (c *storeCache) add(key string, e *openStore) *openStore {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.key, e.refs = key, 1
	for _, o := range c.open {
		if o.key == key {
			e.st.Close()
			o.refs++
			return o
		}
	}
	c.open = append(c.open, e)
	for len(c.open) > maxOpenStores {
		c.dropLocked(c.open[0])
	}
	return e
}

func (c *storeCache) release(e *openStore) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.refs--; e.refs == 0 && e.dropped {
		e.st.Close()
	}
}

// drop releases e and removes it from the cache.
func (c *storeCache) drop(e *openStore) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(e)
	if e.refs--; e.refs == 0 {
		e.st.Close()
	}
}

func (c *storeCache) dropLocked(e *openStore) {
	if !e.dropped {
		e.dropped = true
		c.open = slices.DeleteFunc(c.open, func(o *openStore) bool { return o == e })
		if e.refs == 0 {
			e.st.Close()
		}
	}
}

// closeAll closes every store; no request may use one any more.
func (c *storeCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.open {
		e.dropped = true
		e.st.Close()
	}
	c.open = nil
}

// headerJSON is what the API sends of every checkpoint, from its header.
type headerJSON struct {
	File        string             `json:"file"`
	Step        int64              `json:"step"`
	Kind        checkpoint.Kind    `json:"kind"`
	Size        int64              `json:"size"`
	Compression string             `json:"compression"`
	Meta        map[string]string  `json:"meta"`
	Metrics     map[string]float64 `json:"metrics"`
	Payload     checkpoint.Payload `json:"payload"`
}

func newHeaderJSON(info checkpoint.Info) headerJSON {
	return headerJSON{File: info.Name(), Step: info.Step, Kind: info.Kind, Size: info.Size, Compression: info.Compression,
		Meta: info.Meta, Metrics: info.Metrics, Payload: info.Payload}
}

// ckptJSON is a checkpoint as the timeline sends it.
type ckptJSON struct {
	headerJSON
	Time    *time.Time `json:"time"` // nil if the header does not read
	Damaged string     `json:"damaged"`
	// NoKey says why no identity given opens the file (or why a
	// plaintext file is not read with identities): it is not damage.
	NoKey string `json:"no_key"`
	// Checked is set once the file was read in full in the background
	// (or its header did not read): Damaged and NoKey are then final.
	Checked bool `json:"checked"`
	Prune   bool `json:"prune"`
}

type timelineJSON struct {
	Location    string      `json:"location"`
	Session     *webSession `json:"session"` // as the root last listed it; nil for a store
	Checkpoints []ckptJSON  `json:"checkpoints"`
	Rules       string      `json:"rules"`
	RulesError  string      `json:"rules_error"`
}

// retentionParams are the query parameters of the timeline that name
// retention rules, as prune's flags do.
var retentionParams = []string{"keep_last", "keep_every", "keep_within", "keep_one_per", "prune_kinds"}

// rulesOf parses the retention rules of a timeline's query, if any.
func rulesOf(r *http.Request) (opts []checkpoint.Option, desc string, err error) {
	q := r.URL.Query()
	var given []string
	for _, p := range retentionParams {
		if v := strings.TrimSpace(q.Get(p)); v != "" {
			given = append(given, p+"="+v)
		}
	}
	if len(given) == 0 {
		return nil, "", nil
	}
	num := func(p string) (int64, error) {
		v := strings.TrimSpace(q.Get(p))
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s %q: want a count of 0 or more", p, v)
		}
		return n, nil
	}
	last, err := num("keep_last")
	if err != nil {
		return nil, "", err
	}
	every, err := num("keep_every")
	if err != nil {
		return nil, "", err
	}
	if last > 1<<31 {
		return nil, "", fmt.Errorf("keep_last %d: too many", last)
	}
	opts, err = retentionRules(int(last), every, strings.TrimSpace(q.Get("keep_within")), strings.TrimSpace(q.Get("keep_one_per")), strings.TrimSpace(q.Get("prune_kinds")))
	if err != nil {
		// The flag names in prune's messages: say them as the page does.
		msg := strings.NewReplacer("--keep-", "keep_", "--prune-kinds", "prune_kinds").Replace(err.Error())
		return nil, "", errors.New(msg)
	}
	return opts, strings.Join(given, " "), nil
}

func (s *server) timeline(r *http.Request) (any, error) {
	ctx := r.Context()
	key := r.URL.Query().Get("session")
	out := timelineJSON{Checkpoints: []ckptJSON{}}
	rules, desc, rerr := rulesOf(r)
	if rerr != nil {
		out.RulesError = rerr.Error()
	}
	out.Rules = desc
	st, infos, herrs, release, err := s.openStore(ctx, key, rules...)
	if err != nil {
		return nil, err
	}
	defer release()
	out.Location = st.Location()
	prune := map[string]bool{}
	if len(rules) > 0 {
		removed, err := st.PruneDryRun(ctx)
		if err != nil {
			out.RulesError = reason(err)
		}
		for _, info := range removed {
			prune[info.Name()] = true
		}
	}
	var unchecked []checkpoint.Info
	for _, info := range infos {
		ck := ckptJSON{headerJSON: newHeaderJSON(info), Prune: prune[info.Name()]}
		var v verdict
		if info.Format == 0 {
			v, ck.Checked = herrs.verdict(info.Location), true
		} else {
			t := info.Time.UTC()
			ck.Time = &t
			if v, ck.Checked = s.checks.verdict(info); !ck.Checked {
				unchecked = append(unchecked, info)
			}
		}
		ck.Damaged, ck.NoKey = v.damaged, v.noKey
		out.Checkpoints = append(out.Checkpoints, ck)
	}
	s.checks.enqueue(key, unchecked)
	if s.root != nil {
		// The session as the root last listed it: the page shows its ID
		// and error; the checkpoints are the ones just listed.
		sess, ok, err := s.lookupSession(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok {
			ws := newWebSession(sess)
			out.Session = &ws
		}
	}
	return out, nil
}

// loaded is one checkpoint's header and state, loaded whole and verified.
type loaded struct {
	info  checkpoint.Info
	state json.RawMessage // nil for a byte payload
}

// load loads the checkpoint file of the store key: its state from the
// cache if that file's header is unchanged, else through cli.load.
func (s *server) load(ctx context.Context, key, file string) (loaded, error) {
	if file == "" {
		return loaded{}, badRequest("no file given")
	}
	st, infos, _, release, err := s.openStore(ctx, key)
	if err != nil {
		return loaded{}, err
	}
	defer release()
	i := slices.IndexFunc(infos, func(info checkpoint.Info) bool { return info.Name() == file })
	if i < 0 {
		return loaded{}, &checkpoint.Error{Op: "serve", Path: joinName(st.Location(), file),
			Err: fmt.Errorf("%w: no checkpoint file of that name (layout %s)", checkpoint.ErrNotFound, s.t.layout)}
	}
	info := infos[i]
	if info.Payload == checkpoint.PayloadBytes {
		return s.loadPayload(ctx, st, info)
	}
	// One load of a file at a time: the diff page asks for a diff and its
	// two checkpoints at once.
	ck := keyOf(info)
	state, leader, err := s.states.join(ck)
	for !leader && err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The request that loaded it went away: load it for this one.
		state, leader, err = s.states.join(ck)
	}
	if !leader {
		if err != nil {
			return loaded{}, err
		}
		return loaded{info: info, state: state}, nil
	}
	listed := info
	state, info, err = s.c.load(ctx, st, s.t.layout, selector{file: file})
	if !errors.Is(err, checkpoint.ErrPayloadMismatch) {
		s.checks.record(listed, err)
	}
	s.states.done(ck, state, err)
	if err != nil {
		return loaded{}, err
	}
	return loaded{info: info, state: state}, nil
}

// loadPayload verifies the byte payload info of st, reading it to its end
// unless the checker already did, and returns its header as opening it
// gives it (with the size of a plain one, which List does not give).
func (s *server) loadPayload(ctx context.Context, st *checkpoint.Store[json.RawMessage], info checkpoint.Info) (loaded, error) {
	if v, ok := s.checks.verdict(info); !ok {
		err := verifyCheckpoint(ctx, st, info)
		s.checks.record(info, err)
		if err != nil {
			return loaded{}, err
		}
	} else if !v.good() {
		return loaded{}, verifyCheckpoint(ctx, st, info) // the error itself, again
	}
	r, opened, err := st.OpenPayloadExact(ctx, info)
	if err != nil {
		return loaded{}, err
	}
	r.Close()
	return loaded{info: opened}, nil
}

type errorJSON struct {
	Message string    `json:"message"`
	Types   []string  `json:"types"`
	Step    int64     `json:"step"`
	Time    time.Time `json:"time"`
	Panic   bool      `json:"panic"`
	Stack   string    `json:"stack"`
}

type checkpointJSON struct {
	headerJSON
	Location    string     `json:"location"`
	Time        time.Time  `json:"time"`
	Format      int        `json:"format"`
	Checksum    string     `json:"checksum"`
	Schema      int        `json:"schema"`
	PayloadSize int64      `json:"payload_size"`
	Error       *errorJSON `json:"error"`
	// StateSize is the size in bytes of the state's JSON, decompressed
	// (0 for a byte payload).
	StateSize int       `json:"state_size"`
	State     *jsonNode `json:"state"`
}

func (s *server) checkpoint(r *http.Request) (any, error) {
	q := r.URL.Query()
	l, err := s.load(r.Context(), q.Get("session"), q.Get("file"))
	if err != nil {
		return nil, err
	}
	info := l.info
	out := checkpointJSON{headerJSON: newHeaderJSON(info), Location: info.Location, Time: info.Time.UTC(),
		Format: info.Format, Checksum: checksumName(info.Format), Schema: info.Schema, PayloadSize: info.PayloadSize}
	if e := info.Error; e != nil {
		out.Error = &errorJSON{Message: e.Message, Types: e.Types, Step: e.Step, Time: e.Time.UTC(), Panic: e.Panic, Stack: e.Stack}
	}
	if l.state != nil {
		n, err := nodeAt(l.state, "")
		if err != nil {
			return nil, err
		}
		out.State, out.StateSize = &n, len(l.state)
	}
	return out, nil
}

// stateOf loads the state of the checkpoint a request names.
func (s *server) stateOf(r *http.Request) (json.RawMessage, error) {
	q := r.URL.Query()
	l, err := s.load(r.Context(), q.Get("session"), q.Get("file"))
	if err != nil {
		return nil, err
	}
	if l.state == nil {
		return nil, badRequest("%s holds a byte payload, not a JSON state", l.info.Name())
	}
	return l.state, nil
}

func (s *server) node(r *http.Request) (any, error) {
	state, err := s.stateOf(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	offset, limit := 0, 500
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return nil, badRequest("offset %q: want a count of 0 or more", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 5000 {
			return nil, badRequest("limit %q: want 1 to 5000", v)
		}
	}
	return childrenAt(state, q.Get("path"), offset, limit)
}

func (s *server) search(r *http.Request) (any, error) {
	state, err := s.stateOf(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query().Get("q")
	if strings.TrimSpace(q) == "" {
		return nil, badRequest("nothing to search for: q is empty")
	}
	return searchState(r.Context(), state, q, maxSearchResults)
}

type diffSide struct {
	Session string          `json:"session"`
	File    string          `json:"file"`
	Step    int64           `json:"step"`
	Kind    checkpoint.Kind `json:"kind"`
}

// maxDiffChanges bounds the changes a diff sends.
const maxDiffChanges = 5000

func (s *server) diff(r *http.Request) (any, error) {
	q := r.URL.Query()
	var sides [2]diffSide
	var states [2]any
	for i, p := range []string{"a_", "b_"} {
		key := q.Get(p + "session")
		l, err := s.load(r.Context(), key, q.Get(p+"file"))
		if err != nil {
			return nil, err
		}
		if l.state == nil {
			return nil, badRequest("%s holds a byte payload, not a JSON state: nothing to compare", l.info.Name())
		}
		if states[i], err = decodeJSON(l.state); err != nil {
			return nil, &checkpoint.Error{Op: "serve", Step: l.info.Step, HasStep: true, Path: l.info.Location, Err: err}
		}
		sides[i] = diffSide{Session: key, File: l.info.Name(), Step: l.info.Step, Kind: l.info.Kind}
	}
	changes, exact := diffChanges(states[0], states[1])
	truncated := len(changes) > maxDiffChanges
	if truncated {
		changes = changes[:maxDiffChanges]
	}
	if changes == nil {
		changes = []change{}
	}
	return map[string]any{"a": sides[0], "b": sides[1], "changes": changes, "truncated": truncated, "exact": exact}, nil
}

// forkRequest is the body of a POST to api/fork.
type forkRequest struct {
	Session string            `json:"session"`
	Step    *int64            `json:"step"`
	Meta    map[string]string `json:"meta"`
}

func (s *server) fork(r *http.Request) (any, error) {
	forbidden := func(msg string) error {
		return &apiError{status: http.StatusForbidden, kind: "forbidden", err: errors.New(msg)}
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Checkpoint-CSRF")), []byte(s.csrf)) != 1 {
		return nil, forbidden("a fork needs the page's CSRF token (X-Checkpoint-CSRF)")
	}
	if o := r.Header.Get("Origin"); o != "" && !(strings.HasPrefix(strings.ToLower(o), "http://") && s.allowedHost(o[len("http://"):])) {
		return nil, forbidden("a fork must come from the page of this server (" + s.origin + "), not " + o)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, forbidden("a fork's body must be application/json")
	}
	if !s.write {
		return nil, forbidden("this server is read-only: start it with --write to fork sessions")
	}
	if s.root == nil {
		return nil, badRequest("%s is a store, not a root of sessions: there is no session to fork", s.t.dir)
	}
	var req forkRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("fork: the request does not decode: %v", err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return nil, badRequest("fork: the request holds more than one JSON object")
	}
	if req.Step == nil {
		return nil, badRequest("fork: no step given")
	}
	ctx := r.Context()
	from, ok, err := s.lookupSession(ctx, req.Session)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &apiError{status: http.StatusNotFound, kind: "not_found", err: fmt.Errorf("fork: no session stored as %q in %s", req.Session, s.t.dir)}
	}
	if from.ID == "" {
		return nil, &apiError{status: http.StatusUnprocessableEntity, kind: "damaged", err: fmt.Errorf("fork: the session stored as %q is damaged (%v): its ID is unknown", req.Session, from.Err)}
	}
	// The root is opened for writing only for the fork: Fork takes the
	// claim it needs and releases it.
	// The root reads the states of the session's schemas as they are, as
	// every store the server opens does: a fork loads the checkpoint it
	// starts from.
	_, infos, _, release, err := s.openStore(ctx, req.Session)
	if err != nil {
		return nil, err
	}
	release()
	opts := s.t.options()
	if upTo := maxSchemaOf(infos); upTo > 0 {
		opts = append(opts, readSchemas(upTo))
	}
	root, err := s.t.openSessions(ctx, opts...)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	sess, err := root.Fork(ctx, from.ID, *req.Step, req.Meta)
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": newWebSession(sess)}, nil
}

// A cacheKey names one checkpoint file as it was listed: a file is never
// modified, but the rolling file is replaced under its name.
type cacheKey struct {
	loc  string
	time time.Time
	step int64
	size int64
}

// keyOf returns the cacheKey of info.
func keyOf(info checkpoint.Info) cacheKey {
	return cacheKey{loc: info.Location, time: info.Time, size: info.Size, step: info.Step}
}

// stateCache keeps the states the page looked at most recently, so that
// expanding a node of a big state does not load it again.
type stateCache struct {
	mu      sync.Mutex
	entries []cacheEntry // the most recent last
	loading map[cacheKey]*stateLoad
}

// stateLoad is a load under way, which other requests of the file wait
// for.
type stateLoad struct {
	done  chan struct{}
	state json.RawMessage
	err   error
}

type cacheEntry struct {
	key   cacheKey
	state json.RawMessage
}

// stateCacheBytes bounds the states the cache holds; the newest is always
// kept.
const stateCacheBytes = 512 << 20

// join returns the state of k if the cache holds it, or waits for the
// load of k under way and returns its outcome; if neither, the caller is
// the leader (leader is true) and must call done with its outcome.
func (c *stateCache) join(k cacheKey) (state json.RawMessage, leader bool, err error) {
	c.mu.Lock()
	for i, e := range c.entries {
		if e.key == k {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			c.mu.Unlock()
			return e.state, false, nil
		}
	}
	if l, ok := c.loading[k]; ok {
		c.mu.Unlock()
		<-l.done
		return l.state, false, l.err
	}
	if c.loading == nil {
		c.loading = make(map[cacheKey]*stateLoad)
	}
	c.loading[k] = &stateLoad{done: make(chan struct{})}
	c.mu.Unlock()
	return nil, true, nil
}

// done ends the load of k that join made the caller lead: the ones waiting
// get its outcome, and a state loaded is kept.
func (c *stateCache) done(k cacheKey, state json.RawMessage, err error) {
	c.mu.Lock()
	l := c.loading[k]
	delete(c.loading, k)
	if err == nil {
		c.putLocked(k, state)
	}
	c.mu.Unlock()
	l.state, l.err = state, err
	close(l.done)
}

func (c *stateCache) putLocked(k cacheKey, state json.RawMessage) {
	c.entries = slices.DeleteFunc(c.entries, func(e cacheEntry) bool { return e.key == k })
	c.entries = append(c.entries, cacheEntry{k, state})
	total := 0
	for _, e := range c.entries {
		total += len(e.state)
	}
	for len(c.entries) > 1 && (total > stateCacheBytes || len(c.entries) > 8) {
		total -= len(c.entries[0].state)
		c.entries = c.entries[1:]
	}
}
