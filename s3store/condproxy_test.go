package s3store

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// condProxy is a loopback HTTP proxy in front of the tests' S3 server that
// changes how conditional PutObjects are treated, to play servers that
// are not at hand:
//
//   - cephIfMatch answers a PutObject whose If-Match is quoted (the RFC
//     form) with 412 PreconditionFailed, whatever the object, without
//     forwarding it, as Ceph RGW 16.2.15 does (it compares the header with
//     the bare hexadecimal ETag it stores: measured, and its source's
//     prepare_atomic_modification); one whose If-Match is bare is
//     forwarded with the quotes put back, since versitygw takes the quoted
//     form only.
//   - stripIfMatch and stripIfNoneMatch forward PutObjects without those
//     headers, as a server that ignores them (s3rver 3.7.1 ignores both).
//   - answer, if set, answers a request itself when it returns a status.
//
// A request whose headers it changes is signed again (SigV4) with the
// server's credentials.
type condProxy struct {
	target                         string // http://host:port of the real server
	key, secret                    string
	cephIfMatch                    bool
	stripIfMatch, stripIfNoneMatch bool
	answer                         func(r *http.Request) (status int, code string)

	refusedQuoted atomic.Int64 // quoted If-Match refused (cephIfMatch)
	stripped      atomic.Int64 // conditions removed
	srv           *httptest.Server
}

// start starts p on a free 127.0.0.1 port and returns its endpoint.
func (p *condProxy) start() string {
	p.srv = httptest.NewServer(p)
	return p.srv.URL
}

func (p *condProxy) close() {
	if p.srv != nil {
		p.srv.Close()
	}
}

// proxied is s seen through p, which it starts.
func (p *condProxy) proxied(s server) server {
	p.target, p.key, p.secret = s.endpoint, s.key, s.secret
	return server{endpoint: p.start(), key: s.key, secret: s.secret}
}

func (p *condProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if p.answer != nil {
		if status, code := p.answer(r); status != 0 {
			s3Error(w, status, code)
			return
		}
	}
	resign := false
	if r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") == "" {
		if im := r.Header.Get("If-Match"); im != "" && p.cephIfMatch {
			if strings.HasPrefix(im, `"`) {
				p.refusedQuoted.Add(1)
				s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
				return
			}
			r.Header.Set("If-Match", `"`+im+`"`)
			resign = true
		}
		if p.stripIfMatch && r.Header.Get("If-Match") != "" {
			r.Header.Del("If-Match")
			p.stripped.Add(1)
			resign = true
		}
		if p.stripIfNoneMatch && r.Header.Get("If-None-Match") != "" {
			r.Header.Del("If-None-Match")
			p.stripped.Add(1)
			resign = true
		}
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // signed by the client
	out.ContentLength = int64(len(body))
	if resign {
		out.Header.Del("Authorization")
		creds := aws.Credentials{AccessKeyID: p.key, SecretAccessKey: p.secret}
		if err := v4.NewSigner().SignHTTP(r.Context(), creds, out, out.Header.Get("X-Amz-Content-Sha256"), "s3", "us-east-1", time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// s3Error answers with an S3 error document, as Ceph RGW words one.
func s3Error(w http.ResponseWriter, status int, code string) {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message></Message><RequestId>condproxy</RequestId></Error>`
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// proxiedFixture is newFixture(t) whose client goes through p (started
// here, stopped when the test ends), and the fixture of the server itself.
func proxiedFixture(t *testing.T, p *condProxy) (through, direct *fixture) {
	t.Helper()
	direct = newFixture(t)
	ps := p.proxied(direct.srv)
	t.Cleanup(p.close)
	through = &fixture{t: t, srv: ps, bucket: direct.bucket, count: &counter{rt: http0()}}
	through.client = ps.client(through.count)
	return through, direct
}
