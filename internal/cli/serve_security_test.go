package cli

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The contract's Content-Security-Policy: no inline script or style, no
// eval, nothing from elsewhere.
const serveCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// TestServeAnswersNoPathWithoutItsTokenOrFromAnotherHost sends plain HTTP requests, as
// another local user or a web page could, to every kind of URL the server
// answers: without the token, with a wrong one, or to another Host name
// (DNS rebinding), each gets 403 and no state.
func TestServeAnswersNoPathWithoutItsTokenOrFromAnotherHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSmallRoot(t, dir, "source", 2)
	srv := startServe(t, dir)
	host := strings.TrimSuffix(strings.TrimPrefix(srv.Base, "http://"), "/")
	_, port, _ := strings.Cut(host, ":")
	wrong := strings.Map(func(r rune) rune {
		if r == 'a' {
			return 'b'
		}
		return 'a'
	}, srv.Token)

	paths := []string{"", "static/app.js", "static/app.css", "api/info", "api/sessions",
		"api/timeline?session=source", "api/checkpoint?session=source&file=step_00000001.json",
		"api/node?session=source&file=step_00000001.json&path=/world"}
	for _, path := range paths {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		for _, c := range []struct {
			name, query, host string
		}{
			{"no token", "", ""},
			{"an empty token", sep + "token=", ""},
			{"a wrong token", sep + "token=" + url.QueryEscape(wrong), ""},
			{"another host", sep + "token=" + url.QueryEscape(srv.Token), "evil.example:" + port},
			{"another host without a port", sep + "token=" + url.QueryEscape(srv.Token), "evil.example"},
		} {
			r := rawGet(t, srv, path+c.query, c.host, nil)
			assert.Equal(t, http.StatusForbidden, r.code, "/%s with %s", path, c.name)
			for _, secret := range []string{secretValue, `"players"`, `"csrf"`, "source/step"} {
				assert.NotContains(t, r.body, secret, "/%s with %s", path, c.name)
			}
			assert.Empty(t, r.header.Values("Set-Cookie"), "/%s with %s sets no cookie", path, c.name)
			assert.Empty(t, r.header.Get("Access-Control-Allow-Origin"), "no CORS")
		}
	}

	// The token in the URL opens the page and sets the cookie the page's
	// relative requests carry.
	page := rawGet(t, srv, "?token="+url.QueryEscape(srv.Token), "", nil)
	require.Equal(t, http.StatusOK, page.code, page.body)
	assert.Equal(t, serveCSP, page.header.Get("Content-Security-Policy"))
	assert.Contains(t, page.body, "app.js")
	cookies := (&http.Response{Header: page.header}).Cookies()
	require.Len(t, cookies, 1, "the page's response sets the token's cookie")
	c := cookies[0]
	assert.True(t, c.HttpOnly, "HttpOnly")
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite, "SameSite=Strict")
	assert.Equal(t, "/", c.Path)

	withCookie := rawGet(t, srv, "api/sessions", "", http.Header{"Cookie": {c.Name + "=" + c.Value}})
	require.Equal(t, http.StatusOK, withCookie.code, withCookie.body)
	assert.Contains(t, withCookie.body, `"source"`)
	for _, h := range []string{"localhost:" + port} {
		r := rawGet(t, srv, "api/info?token="+url.QueryEscape(srv.Token), h, nil)
		assert.Equal(t, http.StatusOK, r.code, "Host %s is the server's own", h)
	}
	wrongCookie := rawGet(t, srv, "api/sessions", "", http.Header{"Cookie": {c.Name + "=" + wrong}})
	assert.Equal(t, http.StatusForbidden, wrongCookie.code)
}

// A server on another address than loopback (--addr) is reached by IP
// address, or by the host name --addr gave it, never by another name; one
// on loopback by loopback addresses and localhost only. (newServer only:
// no test listens beyond loopback.)
func TestServeHostCheckOnAndOffLoopback(t *testing.T) {
	t.Parallel()
	root, _, _ := serveFixture(t, 1)
	ctx := context.Background()
	check := func(given string, ip net.IP, ok, refused []string) {
		tgt, err := (&cli{cmd: "serve", getenv: func(string) string { return "" }}).resolve(ctx, root, "")
		require.NoError(t, err)
		s, err := newServer(ctx, &cli{cmd: "serve"}, tgt, false, given, &net.TCPAddr{IP: ip, Port: 4711})
		require.NoError(t, err)
		defer s.close()
		for _, h := range ok {
			assert.True(t, s.allowedHost(h), "--addr %s: Host %s refused", given, h)
		}
		for _, h := range refused {
			assert.False(t, s.allowedHost(h), "--addr %s: Host %s allowed", given, h)
		}
	}
	check("0.0.0.0:4711", net.IPv4zero,
		[]string{"127.0.0.1:4711", "10.1.2.3:4711", "[fd00::1]:4711", "localhost:4711"},
		[]string{"evil.example:4711", "10.1.2.3:4712", "10.1.2.3", "myhost:4711"})
	check("myhost:4711", net.IPv4(192, 168, 1, 9),
		[]string{"MyHost:4711", "192.168.1.9:4711", "127.0.0.1:4711"},
		[]string{"evil.example:4711", "myhost.evil:4711"})
	check("127.0.0.1:0", net.IPv4(127, 0, 0, 1),
		[]string{"127.0.0.1:4711", "[::1]:4711", "localhost:4711"},
		[]string{"10.1.2.3:4711", "evil.example:4711", "127.0.0.1:80"})
}
