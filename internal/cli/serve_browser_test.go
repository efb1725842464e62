package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The browser tests of checkpoint serve: a headless Chromium clicks
// through the pages as a person would, and each check is of what a person
// sees (text, marks, counts), through the ids, classes and data-
// attributes the page (internal/cli/web) keeps for them: #view's data-view
// and data-ready, #error, table#sessions, svg#chart's rect.point, #tree's
// div.node[data-path], #diff-list's .change and the others named below.

// TestServePagesOfARootInABrowser serves one root of sessions
// (writeServeRoot) read-only and visits every page of it, a browser per
// subtest.
func TestServePagesOfARootInABrowser(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	dir := t.TempDir()
	xssStored := writeServeRoot(t, dir)
	srv := startServe(t, dir)

	t.Run("SessionsPageListsSortsAndMarksTheDamagedSession", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		b.open(srv.URL, "sessions")
		require.ElementsMatch(t, []string{longSession, brokenSession, xssStored, orphanSession}, sessionKeys(b),
			"one row per session of the root")
		long := b.text(rowOf(longSession))
		assert.Contains(t, withoutSeparators(long), "3000", "the long session's row shows its 3,000 checkpoints")
		assert.Contains(t, long, "final", "and the kind of its newest")
		assert.Contains(t, long, "score", "and its newest metrics")
		assert.Equal(t, xssSessionID, b.text(rowOf(xssStored)+" .sid"), "the ID is shown as the text it is")

		// The damaged session is marked and says why; the others are not.
		assert.Equal(t, 1, b.count("#sessions tr.session.damaged"))
		assert.Equal(t, 1, b.count(rowOf(orphanSession)+".damaged"), "the session without session.json is marked damaged")
		assert.Contains(t, b.text(rowOf(orphanSession)), "session.json", "the damaged row shows its error")

		// A click on a header sorts by it (either way); a second click
		// reverses.
		byCount := []string{orphanSession, xssStored, brokenSession, longSession} // 1, 2, 7, 3,000 checkpoints
		reversed := slices.Clone(byCount)
		slices.Reverse(reversed)
		b.click(`#sessions th[data-sort="checkpoints"]`)
		waitSessionOrder(b, byCount, reversed)
		first := sessionKeys(b)
		b.shot("sorted")
		b.click(`#sessions th[data-sort="checkpoints"]`)
		if slices.Equal(first, byCount) {
			waitSessionOrder(b, reversed)
		} else {
			waitSessionOrder(b, byCount)
		}

		// Every sortable column sorts: the rows' values of that column are
		// in order, one way or the other (a value a damaged session lacks
		// left out).
		var api struct{ Sessions []webSession }
		require.Equal(t, 200, srv.get(t, "api/sessions", &api))
		byKey := map[string]webSession{}
		for _, ws := range api.Sessions {
			byKey[ws.Key] = ws
		}
		value := map[string]func(webSession) (string, bool){
			"id":          func(w webSession) (string, bool) { return w.ID, w.ID != "" },
			"created":     func(w webSession) (string, bool) { return timeKey(w.Created), w.Created != nil },
			"active":      func(w webSession) (string, bool) { return timeKey(&w.Active), true },
			"checkpoints": func(w webSession) (string, bool) { return fmt.Sprintf("%020d", w.Checkpoints), true },
			"size":        func(w webSession) (string, bool) { return fmt.Sprintf("%020d", w.Size), true },
			"last_kind":   func(w webSession) (string, bool) { return string(w.LastKind), w.LastKind != "" },
		}
		for col, of := range value {
			before := sessionKeys(b)
			b.click(`#sessions th[data-sort="` + col + `"]`)
			// The page sorts in the click's handler; the rows are read
			// again until they are in order or the deadline passes.
			var vals []string
			for deadline := time.Now().Add(5 * time.Second); ; {
				vals = vals[:0]
				for _, k := range sessionKeys(b) {
					if v, ok := of(byKey[k]); ok {
						vals = append(vals, v)
					}
				}
				sorted := slices.IsSorted(vals) || slices.IsSortedFunc(vals, func(x, y string) int { return strings.Compare(y, x) })
				if sorted || time.Now().After(deadline) {
					assert.True(t, sorted, "sorted by %s: %q (before the click: %q)", col, vals, before)
					break
				}
			}
		}

		// A row opens the session's timeline.
		b.click(rowOf(brokenSession) + " a.open")
		b.waitView("timeline")
		assert.Equal(t, 7, b.count("#chart rect.point"))
	})

	t.Run("TimelineDrawsEveryCheckpointAndWhatAPruneWouldRemove", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		b.open(pageURL(srv, "#/timeline/"+longSession), "timeline")
		assert.Equal(t, longSteps, b.count("#chart rect.point"), "one point per checkpoint")
		assert.Equal(t, longSteps-2, b.count(`#chart rect.point[data-kind="step"]`))
		assert.Equal(t, 1, b.count(`#chart rect.point[data-kind="rolling"][data-step="2999"]`))
		assert.Equal(t, 1, b.count(`#chart rect.point[data-kind="final"][data-step="3000"]`))
		assert.Zero(t, b.count("#chart rect.point.damaged"))
		assert.Zero(t, b.count("#chart rect.point.prune"), "no rules, nothing to prune")
		title := evalJS[string](b, `document.querySelector('#chart rect.point[data-step="3000"] title').textContent`)
		assert.Contains(t, withoutSeparators(title), "3000")
		assert.Contains(t, title, "final")
		assert.Positive(t, b.count("#chart path#intervals, #chart .interval"), "the time between saves is drawn")
		b.waitVisible("#legend")

		// 3,000 rows: the newest 200 first, then more on demand.
		assert.Equal(t, 200, b.count("#checkpoints tr.checkpoint"), "the newest 200 rows")
		assert.Equal(t, 1, b.count(`#checkpoints tr.checkpoint[data-file="step_00003000.final.json"]`))
		b.click("#more")
		b.poll("more rows are shown", `document.querySelectorAll('#checkpoints tr.checkpoint').length > 200`)

		// The rules a prune would apply mark what it would remove.
		want := pruneDryRun(t, dir, longSession, checkpoint.KeepLast(5))
		require.NotEmpty(t, want)
		slices.SortFunc(want, func(a, b checkpoint.Info) int { return cmp.Compare(a.Step, b.Step) })
		b.do("keep the last 5",
			chromedp.SetValue(chromedp.CSS(`#rules input[name="keep_last"]`), ""),
			chromedp.SendKeys(chromedp.CSS(`#rules input[name="keep_last"]`), "5"),
			chromedp.Click(chromedp.CSS(`#rules [type="submit"]`), chromedp.NodeVisible))
		wantCount := fmt.Sprintf("would remove %d of %d", len(want), longSteps)
		b.poll("#prune-count says "+wantCount, fmt.Sprintf(
			`document.querySelector('#prune-count') && document.querySelector('#prune-count').innerText.replace(/[,\u00a0\u202f]/g, '').includes(%s)`,
			jsString(wantCount)))
		b.waitView("timeline")
		assert.Equal(t, len(want), b.count("#chart rect.point.prune"), "every checkpoint a prune would remove is marked")
		for _, info := range []checkpoint.Info{want[0], want[len(want)-1]} {
			assert.Equal(t, 1, b.count(fmt.Sprintf(`#chart rect.point.prune[data-step="%d"]`, info.Step)), "step %d", info.Step)
		}
		kept := want[len(want)-1].Step + 1
		assert.Zero(t, b.count(fmt.Sprintf(`#chart rect.point.prune[data-step="%d"]`, kept)), "step %d is kept", kept)
		assert.Equal(t, 1, b.count(fmt.Sprintf(`#checkpoints tr.checkpoint.prune[data-file="%s"]`, filepath.Base(want[len(want)-1].Location))))

		// A point opens its checkpoint. 3,000 points share the chart's width,
		// less than a pixel each: a click at the point's centre could land on
		// its neighbour, so the click is the element's own.
		b.do("click the point of step 2999", chromedp.Evaluate[chromedp.Void](
			`document.querySelector('#chart rect.point[data-step="2999"]').dispatchEvent(new MouseEvent('click', {bubbles: true}))`))
		b.waitView("checkpoint")
		assert.Contains(t, b.text("#header"), "rolling")
	})

	t.Run("CheckpointShowsHeaderAndTreeLoadsChildrenAndFindsAKey", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		b.open(pageURL(srv, "#/checkpoint/"+longSession+"/step_00003000.final.json"), "checkpoint")
		header := b.text("#header")
		for _, want := range []string{"final", "outcome", "won", "score", "96"} {
			assert.Contains(t, header, want)
		}
		assert.Contains(t, withoutSeparators(header), "3000")
		assert.Zero(t, b.count("#error-record"), "a clean checkpoint has no error record")

		// The first level is there; a click on a toggle loads the next.
		b.waitVisible(treeNode("#tree", "/players"))
		assert.Contains(t, b.text(treeNode("#tree", "/players")+" .summary"), "2")
		b.click(treeNode("#tree", "/players") + " .toggle")
		b.waitVisible(treeNode("#tree", "/players/0"))
		b.click(treeNode("#tree", "/players/0") + " .toggle")
		b.waitVisible(treeNode("#tree", "/players/0/hp"))
		assert.Contains(t, b.text(treeNode("#tree", "/players/0/name")+" .value"), "ana")
		assert.Equal(t, ".players[0].hp", evalJS[string](b,
			fmt.Sprintf(`document.querySelector(%s).textContent`, jsString(treeNode("#tree", "/players/0/hp")+" .path"))),
			"each node carries its jq path")
		b.shot("expanded")

		// 1,200 children come 500 at a time.
		b.click(treeNode("#tree", "/history") + " .toggle")
		b.waitVisible(treeNode("#tree", "/history/499"))
		assert.Equal(t, 500, b.count(`#tree div.node[data-path^="/history/"]`))
		b.click("#tree button.more")
		b.waitVisible(treeNode("#tree", "/history/999"))
		b.click("#tree button.more")
		b.waitVisible(treeNode("#tree", "/history/1199"))
		assert.Equal(t, 1200, b.count(`#tree div.node[data-path^="/history/"]`))
		assert.Zero(t, b.count("#tree button.more"), "no more button after the last child")

		// Search finds a key deep in a collapsed subtree and opens the tree
		// down to it.
		const door = "/world/map/regions/north/secret_door"
		b.do("search", chromedp.SendKeys(chromedp.CSS("#search"), "SECRET_door"), chromedp.Click(chromedp.CSS("#search-go")))
		b.waitVisible(fmt.Sprintf(`#search-results .result[data-path=%q]`, door))
		b.shot("search")
		b.click(fmt.Sprintf(`#search-results .result[data-path=%q]`, door))
		b.waitVisible(treeNode("#tree", door) + ".hit")
		assertShows(t, b.text(treeNode("#tree", door)+" .value"), secretValue, "the found value")
		b.shot("found")
	})

	t.Run("ErrorCheckpointShowsItsMessageAndStack", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		b.open(pageURL(srv, "#/timeline/"+brokenSession), "timeline")
		assert.Equal(t, 7, b.count("#chart rect.point"))
		assert.Equal(t, 1, b.count(`#chart rect.point[data-kind="error"][data-step="7"]`))
		assert.Equal(t, 1, b.count(`#checkpoints tr.checkpoint.kind-error[data-file="`+errorFile+`"]`))
		b.click(`#checkpoints tr.checkpoint[data-file="` + errorFile + `"] a.open`)
		b.waitView("checkpoint")
		assert.Contains(t, b.text("#error-record .message"), panicMessage)
		assert.Contains(t, evalJS[string](b, `document.querySelector('#error-record .types').textContent`), "string", "the panic value's type")
		stack := evalJS[string](b, `document.querySelector('#error-record pre.stack, #error-record .stack').textContent`)
		assert.Contains(t, stack, "goroutine")
		assert.Contains(t, stack, "SaveOnPanic")
		b.waitVisible(treeNode("#tree", "/players"))
	})

	t.Run("DamagedFilesAreMarkedAndOpenToAClearError", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		b.open(pageURL(srv, "#/timeline/"+brokenSession), "timeline")
		assert.Equal(t, 1, b.count(`#chart rect.point.damaged[data-file="`+headlessFile+`"]`), "the unreadable header is marked")
		assert.Equal(t, 1, b.count(`#checkpoints tr.checkpoint.damaged[data-file="`+headlessFile+`"]`))
		// The server checks each file in full in the background: the
		// checksum failure is marked as soon as it is found.
		b.poll("the checksum failure is marked", `document.querySelector('#chart rect.point.damaged[data-file="`+damagedFile+`"]') !== null`)
		assert.Equal(t, 2, b.count("#chart rect.point.damaged"), "two damaged files")
		assert.Equal(t, 2, b.count("#checkpoints tr.checkpoint.damaged"))
		b.shot("damaged")
		b.goTo("#/checkpoint/" + brokenSession + "/step_00000099.json")
		b.poll("#error says the checkpoint is missing", `(e => e && !e.hidden && e.offsetHeight > 0 && e.innerText.includes("step_00000099.json"))(document.querySelector('#error'))`)
		b.shot("missing")
		assert.NotEmpty(t, strings.TrimSpace(b.text("nav")), "the page around the error is there")
		for _, file := range []string{damagedFile, headlessFile} {
			b.goTo("#/checkpoint/" + brokenSession + "/" + file)
			b.poll("#error names "+file, fmt.Sprintf(
				`(e => e && !e.hidden && e.offsetHeight > 0 && e.innerText.includes(%s))(document.querySelector('#error'))`, jsString(file)))
			b.shot(file)
			assert.Contains(t, b.text("#error"), "corrupt", "the error says what is wrong with %s", file)
			assert.NotEmpty(t, strings.TrimSpace(b.text("nav")), "the page around the error is there")
			assert.Zero(t, b.count(`#tree div.node`), "no state is shown for %s", file)
		}
	})

	t.Run("CompareShowsTheChangedPathsInBothTrees", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		b.open(pageURL(srv, "#/timeline/"+brokenSession), "timeline")
		b.click(`#checkpoints tr.checkpoint[data-file="step_00000001.json"] input.pick-a`)
		b.click(`#checkpoints tr.checkpoint[data-file="step_00000002.json"] input.pick-b`)
		b.click("#compare")
		b.waitView("diff")
		summary := b.text("#diff-summary")
		assert.Contains(t, summary, "2 changed")
		assert.Contains(t, summary, "1 added")
		assert.Equal(t, 3, b.count("#diff-list .change"))
		for _, c := range []struct{ op, path string }{{"changed", ".turn"}, {"changed", ".players[0].hp"}, {"added", ".loot"}} {
			sel := fmt.Sprintf(`#diff-list .change.%s[data-path=%q]`, c.op, c.path)
			assert.Contains(t, b.text(sel), c.path, "the change shows its path")
		}
		b.click(`#diff-list .change[data-path=".players[0].hp"]`)
		b.waitVisible(treeNode("#tree-a", "/players/0/hp") + ".diff-changed")
		b.waitVisible(treeNode("#tree-b", "/players/0/hp") + ".diff-changed")
		assert.Equal(t, 1, b.count(treeNode("#tree-b", "/players")+".diff-inside"))
		b.click(`#diff-list .change[data-path=".loot"]`)
		b.waitVisible(treeNode("#tree-b", "/loot") + ".diff-added")
		assert.Zero(t, b.count(treeNode("#tree-a", "/loot")), "the added key is not in a")
		b.shot("diff")

		// Two sessions' checkpoints compare as well: step 2 of broken and
		// step 3 of long differ in .turn, .players[0].hp and .loot.
		b.goTo("#/diff/" + brokenSession + "/step_00000002.json/" + longSession + "/step_00000003.json")
		b.poll("the diff of two sessions", `(v => v.dataset.view === 'diff' && v.dataset.ready === '1')(document.querySelector('#view')) && document.querySelector('#diff-list .change.removed[data-path=".loot"]') !== null`)
		assert.Equal(t, 3, b.count("#diff-list .change"))
		b.click(`#diff-list .change[data-path=".loot"]`)
		b.waitVisible(treeNode("#tree-a", "/loot") + ".diff-removed")
		assert.Zero(t, b.count(treeNode("#tree-b", "/loot")), "the removed key is not in b")
		b.shot("diff of two sessions")
	})

	t.Run("MarkupInIDsMetaAndStatesRendersAsText", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		noXSS := func(page string) {
			t.Helper()
			assert.Equal(t, "undefined", evalJS[string](b, `typeof window.__xss`), "a payload ran on the %s page", page)
			assert.Zero(t, b.count(`img[src="x"], script:not([src])`), "a payload became markup on the %s page", page)
		}
		b.open(srv.URL, "sessions")
		assert.Equal(t, xssSessionID, b.text(rowOf(xssStored)+" .sid"))
		assertShows(t, b.text(rowOf(xssStored)), xssValue, "the session's meta value is shown as text")
		noXSS("sessions")

		b.click(rowOf(xssStored) + " a.open")
		b.waitView("timeline")
		assert.Equal(t, 2, b.count("#chart rect.point"))
		assert.Contains(t, b.text("body"), xssSessionID, "the page names the session by its ID")
		noXSS("timeline")

		b.click(`#checkpoints tr.checkpoint[data-file="step_00000002.json"] a.open`)
		b.waitView("checkpoint")
		assertShows(t, b.text("#header"), xssValue, "the meta value is shown as text")
		b.waitVisible(treeNode("#tree", "/note"))
		assertShows(t, b.text(treeNode("#tree", "/note")+" .value"), xssValue, "the state value is shown as text")
		assert.Equal(t, 1, evalJS[int](b, fmt.Sprintf(
			`[...document.querySelectorAll('#tree div.node')].filter(n => n.dataset.path === %s && n.querySelector('.key').textContent.includes(%s)).length`,
			jsString("/"+xssStateKey), jsString(xssStateKey))), "the key is shown as text")
		b.do("search", chromedp.SendKeys(chromedp.CSS("#search"), "onerror"), chromedp.Click(chromedp.CSS("#search-go")))
		b.poll("two results", `document.querySelectorAll('#search-results .result').length === 2`)
		b.shot("search")
		noXSS("checkpoint")
	})
}

// TestServeLivePagesShowWhatARunningGameloopSaves serves a campaign the
// gameloop example wrote and, while the sessions page and then a timeline
// are open, runs the game again: a new session, then two new turns, appear
// without a reload, and the checkpoint picked for a comparison stays
// picked.
func TestServeLivePagesShowWhatARunningGameloopSaves(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	exe := buildGameloop(t, t.TempDir())
	campaign := filepath.Join(t.TempDir(), "campaign")
	runGameloop(t, exe, "-dir", campaign, "-turns", "5")
	runGameloop(t, exe, "-dir", campaign, "-restore", "3", "-turns", "2")
	srv := startServe(t, campaign)

	b := newBrowser(t)
	b.open(srv.URL, "sessions")
	require.ElementsMatch(t, []string{"001", "002"}, sessionKeys(b))
	// A reload would lose this mark.
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__notReloaded = true`))
	runGameloop(t, exe, "-dir", campaign, "-new", "-turns", "1")
	b.poll("session 003 appears", `document.querySelector('#sessions tr.session[data-key="003"]') !== null`)
	assert.ElementsMatch(t, []string{"001", "002", "003"}, sessionKeys(b))
	b.shot("new session")

	b.click(rowOf("001") + " a.open")
	b.waitView("timeline")
	require.Equal(t, 5, b.count("#chart rect.point"))
	b.click(`#checkpoints tr.checkpoint[data-file="turn_002.json"] input.pick-a`)
	runGameloop(t, exe, "-dir", campaign, "-session", "001", "-turns", "2")
	b.poll("turns 6 and 7 appear", `document.querySelectorAll('#chart rect.point').length === 7 && document.querySelector('#chart rect.point[data-step="7"]') !== null`)
	assert.True(t, evalJS[bool](b, `window.__notReloaded === true`), "the page updated without a reload")
	assert.True(t, evalJS[bool](b, `document.querySelector('#checkpoints tr.checkpoint[data-file="turn_002.json"] input.pick-a').checked`),
		"the checkpoint picked before the update is still picked")
	b.shot("new turns")

	b.click(`#chart rect.point[data-step="7"]`)
	b.waitView("checkpoint")
	b.waitVisible(treeNode("#tree", "/characters"))
	b.click(treeNode("#tree", "/characters") + " .toggle")
	b.waitVisible(treeNode("#tree", "/characters/brynja"))
}

// TestServeForkOnlyWithWrite forks a session from a checkpoint's page when
// the server was started with --write, and finds no fork button, and a
// refused POST, without it.
func TestServeForkOnlyWithWrite(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	dir := t.TempDir()
	writeSmallRoot(t, dir, "source", 5)
	const page = "#/checkpoint/source/step_00000003.json"

	t.Run("WithoutWrite", func(t *testing.T) {
		srv := startServe(t, dir)
		b := newBrowser(t)
		b.open(pageURL(srv, page), "checkpoint")
		assert.Zero(t, b.count("#fork"), "no fork button without --write")
		resp := postJSON(t, srv, "api/fork", `{"session":"source","step":3}`, true, nil)
		assert.Equal(t, 403, resp.code, resp.body)
		assert.Equal(t, "forbidden", resp.kind(t))
		assert.Len(t, listSessions(t, dir), 1, "nothing was written")
	})

	t.Run("WithWrite", func(t *testing.T) {
		srv := startServe(t, "--write", dir)
		resp := postJSON(t, srv, "api/fork", `{"session":"source","step":3}`, false, nil)
		assert.Equal(t, 403, resp.code, "a POST without the CSRF header is refused: %s", resp.body)
		resp = postJSON(t, srv, "api/fork", `{"session":"source","step":3}`, true, http.Header{"Origin": {"http://evil.example"}})
		assert.Equal(t, 403, resp.code, "a POST from another origin is refused: %s", resp.body)
		assert.Len(t, listSessions(t, dir), 1, "nothing was written")

		b := newBrowser(t)
		b.open(pageURL(srv, page), "checkpoint")
		b.click("#fork")
		b.poll("the new session's timeline", `location.hash.startsWith('#/timeline/') && location.hash !== '#/timeline/source'`)
		b.waitView("timeline")
		assert.Equal(t, 3, b.count("#chart rect.point"), "the fork holds steps 1 to 3")
		key, err := decodeHashKey(evalJS[string](b, `location.hash`))
		require.NoError(t, err)

		sessions := listSessions(t, dir)
		require.Len(t, sessions, 2)
		i := slices.IndexFunc(sessions, func(s checkpoint.Session) bool { return s.Parent == "source" })
		require.GreaterOrEqual(t, i, 0, "a session forked from source: %+v", sessions)
		assert.EqualValues(t, 3, sessions[i].ParentStep)
		assert.Equal(t, key, filepath.Base(sessions[i].Dir), "the page went to the new session")

		b.click("a#nav-sessions")
		b.waitView("sessions")
		assert.ElementsMatch(t, []string{"source", key}, sessionKeys(b))
	})
}

// TestServeStoreOpensAtItsTimeline serves a store that is not a root of
// sessions, which a writer holds open: the page opens at its timeline,
// with no sessions page, a
// gzipped state opens to its tree, and a byte payload to a note, with no
// tree.
func TestServeStoreOpensAtItsTimeline(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	dir := t.TempDir()
	writeServeStore(t, dir)
	// A writer holds the store throughout: reads still work.
	writer, err := checkpoint.Open[serveState](dir, checkpoint.NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { writer.Close() })
	srv := startServe(t, dir)

	b := newBrowser(t)
	b.open(srv.URL, "timeline")
	assert.Equal(t, "#/timeline/", evalJS[string](b, `location.hash`))
	assert.False(t, evalJS[bool](b, `(e => !!e && e.offsetParent !== null)(document.querySelector('a#nav-sessions'))`),
		"no sessions page to go to")
	assert.Equal(t, 4, b.count("#chart rect.point"))

	b.click(`#checkpoints tr.checkpoint[data-file="step_00000001.json.gz"] a.open`)
	b.waitView("checkpoint")
	assert.Contains(t, b.text("#header"), "gzip")
	b.waitVisible(treeNode("#tree", "/players"))
	assert.Zero(t, b.count("#payload"))

	for _, file := range []string{"step_00000003.json", "step_00000004.json.gz"} {
		b.goTo("#/checkpoint//" + file)
		b.poll("the page of "+file, fmt.Sprintf(
			`(v => v.dataset.view === 'checkpoint' && v.dataset.ready === '1' && document.querySelector('#payload') !== null && document.querySelector('#header').innerText.includes(%s))(document.querySelector('#view'))`,
			jsString(file)))
		b.shot(file)
		assert.Contains(t, b.text("#payload"), "payload", "%s: the page says it holds a byte payload", file)
		if file == "step_00000003.json" {
			// A plain payload's size is in its header.
			assert.Contains(t, b.text("#payload"), fmt.Sprintf("(%d bytes)", payloadSize), "%s: the page gives its size", file)
		}
		assert.Zero(t, b.count("#tree div.node"), "%s: a byte payload has no tree", file)
	}
}

// sessionKeys returns the keys of the sessions page's rows, in order.
func sessionKeys(b *browser) []string {
	b.t.Helper()
	return evalJS[[]string](b, `[...document.querySelectorAll('#sessions tr.session')].map(r => r.dataset.key)`)
}

// waitSessionOrder waits until the sessions page's rows are in one of the
// orders given, by key.
func waitSessionOrder(b *browser, orders ...[]string) {
	b.t.Helper()
	var want []string
	for _, o := range orders {
		j, err := json.Marshal(o)
		require.NoError(b.t, err)
		want = append(want, string(j))
	}
	j, err := json.Marshal(want)
	require.NoError(b.t, err)
	b.poll(fmt.Sprintf("the sessions in one of the orders %s", want), fmt.Sprintf(
		`%s.includes(JSON.stringify([...document.querySelectorAll('#sessions tr.session')].map(r => r.dataset.key)))`, j))
}

// rowOf is the selector of the sessions page's row of the session key.
func rowOf(key string) string { return fmt.Sprintf(`#sessions tr.session[data-key=%q]`, key) }

// treeNode is the selector of the tree node at the JSON pointer path in the
// tree tree ("#tree", "#tree-a").
func treeNode(tree, path string) string { return fmt.Sprintf(`%s div.node[data-path=%q]`, tree, path) }

// assertShows asserts that text, what a person sees, holds value as it is
// or as a JSON string (quoted, its quotes escaped), the two ways a page may
// show a string of a state.
func assertShows(t *testing.T, text, value, what string) {
	t.Helper()
	var quoted strings.Builder
	enc := json.NewEncoder(&quoted)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(value))
	if !strings.Contains(text, value) && !strings.Contains(text, strings.TrimSpace(quoted.String())) {
		t.Errorf("%s: %q shows neither %q nor %s", what, text, value, strings.TrimSpace(quoted.String()))
	}
}

// withoutSeparators removes the thousands separators a page may put in
// numbers.
func withoutSeparators(s string) string {
	return strings.NewReplacer(",", "", "\u00a0", "", "\u202f", "").Replace(s)
}

// pruneDryRun returns what a prune of session id in the root at dir would
// remove under rules, as the library computes it.
func pruneDryRun(t *testing.T, dir, id string, rules ...checkpoint.Option) []checkpoint.Info {
	t.Helper()
	root, err := checkpoint.OpenSessions(dir, checkpoint.ReadOnly())
	require.NoError(t, err)
	defer root.Close()
	s, err := checkpoint.OpenSessionStore[json.RawMessage](root, id, rules...)
	require.NoError(t, err)
	defer s.Close()
	infos, err := s.PruneDryRun(context.Background())
	require.NoError(t, err)
	return infos
}

// listSessions lists the root of sessions at dir.
func listSessions(t *testing.T, dir string) []checkpoint.Session {
	t.Helper()
	root, err := checkpoint.OpenSessions(dir, checkpoint.ReadOnly())
	require.NoError(t, err)
	defer root.Close()
	list, err := root.List(context.Background())
	require.NoError(t, err)
	return list
}

// timeKey returns t in a form that sorts as t does.
func timeKey(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// TestServeABigStateOpensANodeAtATime: a state of megabytes opens at once
// and its big array shows a page of children; the page never holds the
// state (what it received is a small part of it), and search finds the
// last element.
func TestServeABigStateOpensANodeAtATime(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	dir := t.TempDir()
	n, megabytes := 150_000, int64(5)
	if raceEnabled {
		n, megabytes = 40_000, 1 // encoding and checking under the race detector are slow
	}
	entities := make([]map[string]any, n)
	for i := range entities {
		entities[i] = map[string]any{"id": i, "name": fmt.Sprintf("entity-%d", i), "hp": 100}
	}
	st, err := checkpoint.Open[map[string]any](dir, checkpoint.NoSync())
	require.NoError(t, err)
	info, err := st.Save(context.Background(), 1, map[string]any{"turn": 1, "entities": entities})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Greater(t, info.Size, megabytes<<20, "a state of megabytes")
	srv := startServe(t, dir)

	b := newBrowser(t)
	b.open(srv.URL+"#/checkpoint//"+info.Name(), "checkpoint")
	assert.Contains(t, b.text(treeNode("#tree", "/entities")+" .summary"), strconv.Itoa(n))
	b.click(treeNode("#tree", "/entities") + " .toggle")
	b.waitVisible(treeNode("#tree", "/entities/499"))
	assert.Equal(t, 500, b.count(`#tree div.node[data-path^="/entities/"]`))
	assert.Equal(t, 1, b.count("#tree button.more"))
	received := evalJS[float64](b, `performance.getEntriesByType('resource').filter(e => e.name.includes('/api/')).reduce((s, e) => s + e.decodedBodySize, 0)`)
	assert.Less(t, received, float64(info.Size)/20, "the page received %v bytes of a state of %d", received, info.Size)

	last := fmt.Sprintf("/entities/%d/name", n-1)
	b.do("search", chromedp.SendKeys(chromedp.CSS("#search"), fmt.Sprintf("entity-%d", n-1)), chromedp.Click(chromedp.CSS("#search-go")))
	b.waitVisible(fmt.Sprintf(`#search-results .result[data-path=%q]`, last))
	b.click(fmt.Sprintf(`#search-results .result[data-path=%q]`, last))
	b.waitVisible(treeNode("#tree", last) + ".hit")
	assert.LessOrEqual(t, b.count(`#tree div.node[data-path^="/entities/"]`), 2000, "the page holds a page or two of the array, not the array")
	b.shot("big state")
	// The elements before the one found are a click away.
	b.click("#tree button.earlier")
	b.waitVisible(treeNode("#tree", fmt.Sprintf("/entities/%d", (n-1)/500*500-1)))
}
