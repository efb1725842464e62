// The page of `checkpoint serve`: hash routes, each drawn from the JSON API.
// Every value from the server is written as text (textContent, setAttribute),
// never as markup; the Content-Security-Policy forbids inline code and styles.
'use strict';
(() => {
  const KINDS = ['step', 'rolling', 'final', 'error'];
  const PAGE = 500; // children per api/node request
  const ROWS = 200; // checkpoint rows rendered at a time
  const POLL_MS = 1500;

  const view = document.getElementById('view');
  const errorBox = document.getElementById('error');
  let info = null;
  let current = null; // {refresh} of the view on screen
  let generation = 0; // bumped on every route change; stale answers are dropped
  const ui = { sort: { key: 'active', desc: true }, rules: {}, pick: loadPicks(), shown: {} };
  // The A/B picks of a diff outlive a reload and a move to another
  // session's timeline: sessionStorage, this tab only.
  function loadPicks() {
    try {
      const p = JSON.parse(sessionStorage.getItem('checkpoint-picks') || 'null');
      const ok = (x) => x === null || (x && typeof x.key === 'string' && typeof x.file === 'string');
      if (p && ok(p.a) && ok(p.b)) return { a: p.a, b: p.b };
    } catch (e) { /* storage off or bad data: start afresh */ }
    return { a: null, b: null };
  }
  function savePicks() {
    try { sessionStorage.setItem('checkpoint-picks', JSON.stringify(ui.pick)); } catch (e) { /* storage off */ }
  }

  // el builds an element: attrs sets attributes (class, data-*, …) or, for
  // keys starting with "on", listeners; children are nodes or text.
  function el(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }
  function svgEl(tag, attrs, ...children) {
    return build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
  }
  function build(e, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // ---- talking to the server ----

  class ApiError extends Error {
    constructor(message, kind, status) { super(message); this.kind = kind; this.status = status; }
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.set(k, v);
    return q.toString();
  }

  // api fetches one JSON answer; with an etag it asks If-None-Match and
  // returns {notModified: true} on 304.
  async function api(path, params, opts = {}) {
    const headers = {};
    if (opts.etag) headers['If-None-Match'] = opts.etag;
    const init = { headers, cache: 'no-store', credentials: 'same-origin' };
    if (opts.body !== undefined) {
      init.method = 'POST';
      headers['Content-Type'] = 'application/json';
      headers['X-Checkpoint-CSRF'] = info ? info.csrf : '';
      init.body = JSON.stringify(opts.body);
    }
    const q = query(params || {});
    let res;
    try {
      res = await fetch('api/' + path + (q ? '?' + q : ''), init);
    } catch (e) {
      throw new ApiError('cannot reach the server: ' + e.message, 'network', 0);
    }
    if (res.status === 304) return { notModified: true };
    const text = await res.text();
    let data = null;
    try { data = JSON.parse(text); } catch (e) { /* a plain page, such as the 403 */ }
    if (!res.ok) {
      const msg = data && data.error ? data.error : `HTTP ${res.status}: ${text.trim().split('\n')[0] || res.statusText}`;
      throw new ApiError(msg, data && data.kind, res.status);
    }
    if (data === null) throw new ApiError('the server sent no JSON for api/' + path, 'bad_response', res.status);
    return { data, etag: res.headers.get('ETag') };
  }

  function showError(msg) {
    errorBox.textContent = msg;
    errorBox.hidden = !msg;
  }

  // ---- formatting ----

  function fmtSize(n) {
    if (n === null || n === undefined) return '';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
  }
  function fmtTime(ts) {
    return ts ? ts.replace('T', ' ').replace(/\.\d+/, '').replace(/Z$/, ' UTC') : '';
  }
  function fmtDur(sec) {
    if (sec === null || sec === undefined || !isFinite(sec)) return '';
    if (sec < 0) return '−' + fmtDur(-sec);
    if (sec < 1) return `${Math.round(sec * 1000)} ms`;
    if (sec < 120) return `${+sec.toFixed(1)} s`;
    if (sec < 7200) return `${+(sec / 60).toFixed(1)} min`;
    if (sec < 172800) return `${+(sec / 3600).toFixed(1)} h`;
    return `${+(sec / 86400).toFixed(1)} d`;
  }
  function fmtMap(m) {
    return m ? Object.entries(m).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join('  ') : '';
  }

  function ptrChild(parent, key) {
    return parent + '/' + String(key).replace(/~/g, '~0').replace(/\//g, '~1');
  }
  // ptrPrefixes lists "/a", "/a/b", … up to ptr itself (the root "" excluded).
  function ptrPrefixes(ptr) {
    const out = [];
    for (let i = ptr.indexOf('/', 1); i !== -1; i = ptr.indexOf('/', i + 1)) out.push(ptr.slice(0, i));
    if (ptr !== '') out.push(ptr);
    return out;
  }

  // ---- routes ----

  const routes = { '': sessionsPage, timeline: timelinePage, checkpoint: checkpointPage, diff: diffPage };

  function go(...parts) {
    location.hash = '#/' + parts.map(encodeURIComponent).join('/');
  }

  function setCrumbs(...items) {
    const crumbs = document.getElementById('crumbs');
    crumbs.replaceChildren();
    items.forEach((it, i) => {
      if (i) crumbs.append(el('span', { class: 'sep' }, '›'));
      crumbs.append(it.href ? el('a', { href: it.href }, it.text) : el('span', {}, it.text));
    });
  }
  function sessionName(key) { return key === '' ? 'store' : key; }
  function timelineHref(key) { return '#/timeline/' + encodeURIComponent(key); }
  function checkpointHref(key, file) { return '#/checkpoint/' + encodeURIComponent(key) + '/' + encodeURIComponent(file); }

  async function route() {
    const gen = ++generation;
    current = null;
    showError('');
    view.removeAttribute('data-ready');
    let parts;
    try {
      parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    } catch (e) {
      return fail(gen, new ApiError('malformed address: ' + location.hash));
    }
    const page = routes[parts[0]];
    if (!page) return fail(gen, new ApiError('no such page: ' + location.hash));
    view.setAttribute('data-view', parts[0] || 'sessions');
    view.replaceChildren(el('p', { class: 'loading' }, 'Loading…'));
    try {
      const v = await page(gen, ...parts.slice(1));
      if (gen !== generation) return;
      current = v || null;
      view.setAttribute('data-ready', '1');
    } catch (e) {
      if (e.kind !== 'stale') fail(gen, e);
    }
  }

  function fail(gen, e) {
    if (gen !== generation) return;
    view.setAttribute('data-view', 'error');
    view.replaceChildren(el('p', { class: 'failed' }, 'This page could not be shown.'));
    showError(e.message);
    view.setAttribute('data-ready', '1');
  }

  // stale throws when the user has moved on, so a late answer draws nothing.
  function stale(gen) {
    if (gen !== generation) throw new ApiError('superseded', 'stale');
  }

  // ---- sessions ----

  async function sessionsPage(gen) {
    if (info.root !== 'sessions') {
      location.replace('#/timeline/');
      throw new ApiError('superseded', 'stale');
    }
    setCrumbs();
    let { data, etag } = await api('sessions');
    stale(gen);
    const cols = [['id', 'ID'], ['created', 'Created'], ['active', 'Last active'], ['checkpoints', 'Checkpoints'],
      ['size', 'Size'], [null, 'Last step'], ['last_kind', 'Newest kind'], [null, 'Metrics'], [null, 'Meta and notes']];
    const head = el('tr', {}, cols.map(([key, label]) => key
      ? el('th', { 'data-sort': key, tabindex: 0, onclick: () => sortBy(key), onkeydown: (ev) => { if (ev.key === 'Enter') sortBy(key); } }, label)
      : el('th', {}, label)));
    const body = el('tbody');
    const count = el('p', { class: 'count' });
    view.replaceChildren(el('h1', {}, 'Sessions'), count, el('table', { id: 'sessions' }, el('thead', {}, head), body));

    function sortBy(key) {
      ui.sort = { key, desc: ui.sort.key === key ? !ui.sort.desc : false };
      draw();
    }
    function draw() {
      const { key, desc } = ui.sort;
      const rows = data.sessions.slice().sort((x, y) => {
        const a = key === 'active' ? x.active : x[key];
        const b = key === 'active' ? y.active : y[key];
        if (a === b) return 0;
        if (a === null || a === undefined || a === '') return 1; // unknown last, either way
        if (b === null || b === undefined || b === '') return -1;
        return (a < b ? -1 : 1) * (desc ? -1 : 1);
      });
      for (const th of head.querySelectorAll('th[data-sort]')) {
        const on = th.getAttribute('data-sort') === key;
        th.classList.toggle('sorted', on);
        th.classList.toggle('desc', on && desc);
        if (on) th.setAttribute('aria-sort', desc ? 'descending' : 'ascending'); else th.removeAttribute('aria-sort');
      }
      count.textContent = `${rows.length} session${rows.length === 1 ? '' : 's'} in ${info.location}`;
      body.replaceChildren(...rows.map(sessionRow));
    }
    draw();
    return {
      async refresh() {
        const r = await api('sessions', {}, { etag });
        if (r.notModified || gen !== generation) return;
        ({ data, etag } = r);
        draw();
      },
    };
  }

  function sessionRow(s) {
    const notes = [];
    if (s.parent) notes.push(el('span', { class: 'parent' }, `forked from ${s.parent}`, s.parent_step != null ? ` at step ${s.parent_step}` : ''));
    if (s.error) notes.push(el('span', { class: 'problem' }, s.error));
    if (s.meta && Object.keys(s.meta).length) notes.push(el('span', { class: 'meta mono' }, fmtMap(s.meta)));
    return el('tr', { class: 'session' + (s.error ? ' damaged' : ''), 'data-key': s.key },
      el('td', { class: 'sid' }, el('a', { class: 'open', href: timelineHref(s.key) }, s.id || `(${s.key})`)),
      el('td', { class: 'time', title: s.created || '' }, fmtTime(s.created)),
      el('td', { class: 'time', title: s.active || '' }, fmtTime(s.active)),
      el('td', { class: 'num' }, s.checkpoints),
      el('td', { class: 'num', title: `${s.size} bytes` }, fmtSize(s.size)),
      el('td', { class: 'num' }, s.last_step ?? ''),
      el('td', {}, s.last_kind ? el('span', { class: 'kind kind-' + s.last_kind }, s.last_kind) : ''),
      el('td', { class: 'mono' }, fmtMap(s.last_metrics)),
      el('td', {}, notes));
  }

  // ---- timeline ----

  async function timelinePage(gen, key = '') {
    setCrumbs({ text: sessionName(key) });
    const rules = ui.rules[key] || {};
    let etag = null;
    let data = null;
    const title = el('h1');
    const summary = el('p', { class: 'count' });
    const chart = el('div', { class: 'chart' });
    const legend = el('div', { id: 'legend' });
    const pruneCount = el('span', { id: 'prune-count' });
    const rulesText = el('span', { class: 'rules' });
    const field = (name, label, type, hint) => el('label', {}, label,
      el('input', { name, type, placeholder: hint, value: rules[name] || '', min: type === 'number' ? 0 : null }));
    const form = el('form', { id: 'rules', onsubmit: (ev) => { ev.preventDefault(); applyRules(); } },
      el('strong', {}, 'Retention rules'),
      field('keep_last', 'keep last', 'number', 'N'),
      field('keep_every', 'keep every', 'number', 'K steps'),
      field('keep_within', 'keep within', 'text', '36h'),
      field('keep_one_per', 'keep one per', 'text', '1d'),
      field('prune_kinds', 'prune kinds too', 'text', 'final,error'),
      el('button', { type: 'submit' }, 'Show what a prune removes'),
      el('button', { type: 'button', onclick: () => { for (const i of form.querySelectorAll('input')) i.value = ''; applyRules(); } }, 'Clear'),
      el('div', { class: 'verdict' }, pruneCount, rulesText));
    const table = el('table', { id: 'checkpoints' });
    const more = el('button', { id: 'more', type: 'button', hidden: true, onclick: () => { ui.shown[key] = (ui.shown[key] || ROWS) + ROWS; drawTable(); } });
    const pickA = el('span', { class: 'picked' });
    const pickB = el('span', { class: 'picked' });
    const compare = el('button', { id: 'compare', type: 'button', onclick: () => {
      const { a, b } = ui.pick;
      if (a && b) go('diff', a.key, a.file, b.key, b.file);
    } }, 'Compare A with B');
    view.replaceChildren(title, summary, chart, legend, form,
      el('div', { class: 'picker', id: 'picks' }, el('span', {}, 'A: '), pickA, el('span', {}, ' B: '), pickB, compare),
      table, more);

    async function load(withEtag) {
      const r = await api('timeline', { session: key, ...ui.rules[key] }, { etag: withEtag ? etag : null });
      if (r.notModified || gen !== generation) return;
      ({ data, etag } = r);
      draw();
    }
    function applyRules() {
      const set = {};
      for (const i of form.querySelectorAll('input')) if (i.value.trim() !== '') set[i.name] = i.value.trim();
      ui.rules[key] = set;
      load(false).catch((e) => showError(e.message));
    }
    function draw() {
      const s = data.session;
      title.textContent = s ? `Session ${s.id || s.key}` : 'Store';
      const total = data.checkpoints.reduce((n, c) => n + c.size, 0);
      summary.textContent = `${data.checkpoints.length} checkpoints, ${fmtSize(total)}, in ${data.location}`;
      if (s && s.error) summary.append(el('span', { class: 'problem' }, ` — ${s.error}`));
      const pruned = data.checkpoints.filter((c) => c.prune).length;
      pruneCount.textContent = `would remove ${pruned} of ${data.checkpoints.length}`;
      rulesText.textContent = data.rules ? `(${data.rules})` : '(no rules given)';
      showError(data.rules_error || '');
      chart.replaceChildren(drawChart(data.checkpoints, key));
      drawLegend(legend);
      drawTable();
    }
    function drawTable() {
      const list = data.checkpoints;
      const shown = Math.min(list.length, ui.shown[key] || ROWS);
      const rows = [];
      for (let i = list.length - 1; i >= list.length - shown; i--) rows.push(checkpointRow(list, i, key, updatePicks));
      table.replaceChildren(el('thead', {}, el('tr', {}, ['A', 'B', 'Step', 'File', 'Kind', 'Saved', 'After', 'Size', 'Payload', 'Metrics', 'Problem'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows));
      more.hidden = shown >= list.length;
      more.textContent = `Show ${Math.min(ROWS, list.length - shown)} more (${list.length - shown} older not shown)`;
      updatePicks();
    }
    function updatePicks() {
      const name = (p) => (p ? `${p.key === key ? '' : sessionName(p.key) + ' / '}${p.file}` : '—');
      pickA.textContent = name(ui.pick.a);
      pickB.textContent = name(ui.pick.b);
      compare.disabled = !(ui.pick.a && ui.pick.b);
    }

    await load(false);
    return { refresh: () => load(true) };
  }

  function interval(list, i) {
    if (i === 0 || !list[i].time || !list[i - 1].time) return null;
    return (Date.parse(list[i].time) - Date.parse(list[i - 1].time)) / 1000;
  }

  function checkpointRow(list, i, key, onPick) {
    const c = list[i];
    const cls = ['checkpoint', 'kind-' + c.kind];
    if (c.damaged) cls.push('damaged');
    if (c.no_key) cls.push('nokey');
    if (c.prune) cls.push('prune');
    const pick = (side) => el('input', {
      type: 'radio', name: 'pick-' + side, class: 'pick-' + side, value: c.file, 'aria-label': `${side.toUpperCase()}: ${c.file}`,
      checked: !!(ui.pick[side] && ui.pick[side].key === key && ui.pick[side].file === c.file),
      onchange: () => { ui.pick[side] = { key, file: c.file }; savePicks(); onPick(); },
    });
    return el('tr', { class: cls.join(' '), 'data-file': c.file },
      el('td', {}, pick('a')), el('td', {}, pick('b')),
      el('td', { class: 'num' }, c.step),
      el('td', { class: 'mono' }, el('a', { class: 'open', href: checkpointHref(key, c.file) }, c.file)),
      el('td', {}, el('span', { class: 'kind kind-' + c.kind }, c.kind), c.prune ? el('span', { class: 'tag prune-tag' }, 'prune') : null),
      el('td', { class: 'time', title: c.time || '' }, fmtTime(c.time)),
      el('td', { class: 'num' }, fmtDur(interval(list, i))),
      el('td', { class: 'num', title: `${c.size} bytes` }, fmtSize(c.size), c.compression ? ` ${c.compression}` : ''),
      el('td', {}, c.payload),
      el('td', { class: 'mono' }, fmtMap(c.metrics)),
      el('td', { class: c.damaged ? 'problem' : 'note-key' }, c.damaged || c.no_key));
  }

  // drawChart draws a bar per checkpoint (x: step, height: size, colour:
  // kind) and a line of the seconds since the previous save.
  function drawChart(list, key) {
    const W = 1000;
    const H = 260;
    const m = { l: 64, r: 64, t: 12, b: 30 };
    const pw = W - m.l - m.r;
    const ph = H - m.t - m.b;
    const svg = svgEl('svg', { id: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'size and time between saves by step' });
    svg.append(svgEl('defs', {}, svgEl('pattern', { id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
      svgEl('rect', { width: 6, height: 6, class: 'hatch-bg' }), svgEl('line', { x1: 0, y1: 0, x2: 0, y2: 6, class: 'hatch-line' }))));
    if (!list.length) {
      svg.append(svgEl('text', { x: W / 2, y: H / 2, class: 'empty' }, 'no checkpoints'));
      return svg;
    }
    const s0 = list[0].step;
    const s1 = list[list.length - 1].step;
    const span = Math.max(1, s1 - s0);
    const bw = Math.max(1, Math.min(24, (pw / Math.max(list.length, span + 1)) * 0.8));
    const pad = bw / 2 + 2; // keeps the first and last bars inside the axes
    const x = (step) => m.l + pad + (list.length === 1 ? (pw - 2 * pad) / 2 : ((step - s0) / span) * (pw - 2 * pad));
    const maxSize = list.reduce((mx, c) => Math.max(mx, c.size), 1);
    const gaps = list.map((_, i) => interval(list, i));
    const maxGap = gaps.reduce((mx, g) => (g === null ? mx : Math.max(mx, g)), 0);

    // axes and ticks
    const axes = svgEl('g', { class: 'axes' });
    axes.append(svgEl('line', { x1: m.l, y1: m.t + ph, x2: m.l + pw, y2: m.t + ph }));
    for (let k = 0; k <= 4; k++) {
      const y = m.t + ph - (k / 4) * ph;
      axes.append(svgEl('line', { x1: m.l, y1: y, x2: m.l + pw, y2: y, class: 'grid' }),
        svgEl('text', { x: m.l - 6, y: y + 4, class: 'tick left' }, fmtSize(Math.round((maxSize * k) / 4))));
      if (maxGap > 0) axes.append(svgEl('text', { x: m.l + pw + 6, y: y + 4, class: 'tick right' }, fmtDur((maxGap * k) / 4)));
    }
    // Step ticks at a round interval (1, 2 or 5 times a power of ten).
    const raw = Math.max(1, span / 8);
    const pow = 10 ** Math.floor(Math.log10(raw));
    const every = [1, 2, 5, 10].map((f) => f * pow).find((t) => t >= raw);
    for (let step = Math.ceil(s0 / every) * every; step <= s1; step += every) {
      axes.append(svgEl('text', { x: x(step), y: m.t + ph + 14, class: 'tick bottom' }, step));
    }
    axes.append(svgEl('text', { x: m.l + pw / 2, y: H - 2, class: 'axis-label' }, 'step'));
    svg.append(axes);

    const bars = svgEl('g', { class: 'bars' });
    for (const c of list) {
      const h = Math.max(c.damaged ? 10 : 2, (c.size / maxSize) * ph); // a damaged file stays visible
      const cls = ['point', 'kind-' + c.kind];
      if (c.damaged) cls.push('damaged');
      if (c.no_key) cls.push('nokey');
      if (c.prune) cls.push('prune');
      bars.append(svgEl('rect', {
        class: cls.join(' '), x: (x(c.step) - bw / 2).toFixed(2), y: (m.t + ph - h).toFixed(2), width: bw.toFixed(2), height: h.toFixed(2),
        'data-file': c.file, 'data-step': c.step, 'data-kind': c.kind,
      }, svgEl('title', {}, `step ${c.step}, ${c.kind}, ${fmtSize(c.size)}${c.damaged ? ', damaged: ' + c.damaged : ''}${c.no_key ? ', not read: ' + c.no_key : ''}${c.prune ? ', a prune would remove it' : ''}`)));
    }
    bars.addEventListener('click', (ev) => {
      const file = ev.target.closest && ev.target.closest('rect.point');
      if (file) go('checkpoint', key, file.getAttribute('data-file'));
    });
    svg.append(bars);

    if (maxGap > 0) {
      let d = '';
      gaps.forEach((g, i) => {
        if (g === null) return;
        const y = m.t + ph - (Math.max(0, g) / maxGap) * ph;
        d += `${d && gaps[i - 1] !== null ? 'L' : 'M'}${x(list[i].step).toFixed(2)},${y.toFixed(2)}`;
      });
      svg.append(svgEl('path', { id: 'intervals', d }, svgEl('title', {}, 'time since the previous save')));
    }
    return svg;
  }

  function drawLegend(legend) {
    const swatch = (cls, label) => el('span', { class: 'item' }, el('span', { class: 'swatch ' + cls }), label);
    legend.replaceChildren(...KINDS.map((k) => swatch('kind-' + k, k)),
      swatch('damaged', 'damaged'), swatch('nokey', 'needs a key (not damaged)'), swatch('prune', 'a prune would remove'), swatch('interval', 'time since previous save (right axis)'));
  }

  // ---- checkpoint ----

  async function checkpointPage(gen, key = '', file = '') {
    setCrumbs({ text: sessionName(key), href: timelineHref(key) }, { text: file });
    const { data: c } = await api('checkpoint', { session: key, file });
    stale(gen);
    const parts = [el('h1', {}, `Step ${c.step} `, el('span', { class: 'kind kind-' + c.kind }, c.kind), el('span', { class: 'file' }, c.file))];
    if (info.write && info.root === 'sessions') {
      parts.push(el('p', { class: 'actions' }, el('button', { id: 'fork', type: 'button', onclick: (ev) => fork(ev.target, key, c.step) },
        `Fork a new session from step ${c.step}`)));
    }
    const rows = [['file', c.file], ['step', c.step], ['kind', c.kind], ['saved', fmtTime(c.time)], ['size', `${fmtSize(c.size)} (${c.size} bytes)`],
      ['compression', c.compression || 'none'], ['format', c.format], ['checksum', c.checksum], ['schema', c.schema],
      ['payload', c.state ? `JSON state, ${fmtSize(c.state_size)} decompressed` : c.payload_size > 0 ? `bytes, ${fmtSize(c.payload_size)}` : 'bytes']];
    for (const [k, v] of Object.entries(c.meta || {})) rows.push([`meta ${k}`, typeof v === 'string' ? v : JSON.stringify(v), 'meta']);
    for (const [k, v] of Object.entries(c.metrics || {})) rows.push([`metric ${k}`, String(v), 'metric']);
    parts.push(el('dl', { id: 'header' }, rows.map(([k, v, cls]) => [el('dt', { class: cls }, k), el('dd', { class: cls }, v)])));
    if (c.error) {
      const e = c.error;
      parts.push(el('section', { id: 'error-record' }, el('h2', {}, e.panic ? 'Panic' : 'Error'),
        el('p', { class: 'message' }, e.message),
        el('p', { class: 'types' }, 'types: ', (e.types || []).map((t, i) => [i ? ', ' : '', el('code', {}, t)])),
        el('p', { class: 'when' }, `at step ${e.step}, ${fmtTime(e.time)}`),
        e.stack ? el('pre', { class: 'stack' }, e.stack) : null));
    }
    if (!c.state) {
      parts.push(el('p', { id: 'payload' }, c.payload_size >= 0 ? `Byte payload of ${fmtSize(c.payload_size)} (${c.payload_size} bytes): not shown as a tree.` : 'Byte payload (its size shows only at its end): not shown as a tree.'));
      view.replaceChildren(...parts);
      return null;
    }
    const tree = el('div', { id: 'tree', class: 'tree' });
    const results = el('div', { id: 'search-results' });
    const input = el('input', { id: 'search', type: 'search', placeholder: 'key or value', 'aria-label': 'search the state' });
    const t = makeTree(tree, { session: key, file, marks: {} }, c.state);
    parts.push(el('h2', {}, 'State'),
      el('form', { class: 'search', onsubmit: (ev) => { ev.preventDefault(); search(); } }, input, el('button', { id: 'search-go', type: 'submit' }, 'Search')),
      results, tree);
    view.replaceChildren(...parts);
    await t.expand(t.root);

    async function search() {
      const q = input.value;
      if (!q) { results.replaceChildren(); return; }
      results.replaceChildren(el('p', { class: 'loading' }, 'Searching…'));
      try {
        const { data } = await api('search', { session: key, file, q });
        const items = data.results.map((r) => el('button', { type: 'button', class: 'result', 'data-path': r.path, onclick: () => t.reveal(r.path).catch((e) => showError(e.message)) },
          el('span', { class: 'key' }, r.key), r.value !== undefined && r.value !== null ? el('span', { class: 'value t-' + r.type }, fmtScalar(r.value, r.type)) : el('span', { class: 'summary' }, r.type),
          el('span', { class: 'ptr' }, r.path || '(root)')));
        results.replaceChildren(el('p', { class: 'count' }, `${items.length}${data.truncated ? '+' : ''} match${items.length === 1 ? '' : 'es'}${data.truncated ? ' (first 200 shown)' : ''}`), ...items);
      } catch (e) {
        results.replaceChildren();
        showError(e.message);
      }
    }
    return null;
  }

  async function fork(button, key, step) {
    button.disabled = true;
    try {
      const { data } = await api('fork', {}, { body: { session: key, step, meta: {} } });
      go('timeline', data.session.key);
    } catch (e) {
      showError(e.message);
      button.disabled = false;
    }
  }

  function fmtScalar(v, type) {
    return type === 'string' ? JSON.stringify(v) : String(v);
  }

  // makeTree draws a lazily loaded state tree into box. ctx.marks maps a
  // JSON Pointer to the classes its node gets (the diff's highlights).
  function makeTree(box, ctx, rootNode) {
    const root = nodeEl(rootNode, null, rootNode.jq, false); // jq paths come from the server, spelled as diff spells them
    box.replaceChildren(root);

    function nodeEl(n, key, jq, inArray) {
      const container = n.type === 'object' || n.type === 'array';
      const d = el('div', { class: 'node t-' + n.type, 'data-path': n.path });
      for (const c of ctx.marks[n.path] || []) d.classList.add(c);
      d.cpNode = n;
      const row = el('div', { class: 'row' });
      if (container) {
        row.append(el('button', { type: 'button', class: 'toggle', 'aria-expanded': 'false', 'aria-label': 'expand ' + jq, onclick: () => toggle(d).catch((e) => showError(e.message)) }, '▸'));
      } else {
        row.append(el('span', { class: 'toggle-space' }));
      }
      row.append(el('span', { class: 'key' }, key === null ? '(root)' : inArray ? `[${key}]` : key));
      if (container) {
        const cnt = n.count;
        row.append(el('span', { class: 'summary' }, n.type === 'object' ? `{${cnt} key${cnt === 1 ? '' : 's'}}` : `[${cnt} item${cnt === 1 ? '' : 's'}]`));
      } else {
        row.append(el('span', { class: 'value', title: 'click to show all of it', onclick: (ev) => ev.currentTarget.classList.toggle('full') }, fmtScalar(n.value, n.type)));
        if (n.truncated) row.append(el('span', { class: 'tag' }, 'cut'));
      }
      row.append(el('code', { class: 'path', tabindex: 0, title: 'jq path (click to copy)', onclick: copy }, jq));
      d.append(row);
      return d;
    }

    function copy(ev) {
      const text = ev.currentTarget.textContent;
      if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
      const sel = window.getSelection();
      sel.selectAllChildren(ev.currentTarget);
    }

    async function toggle(d) {
      if (d.classList.contains('open')) {
        d.classList.remove('open');
        d.querySelector(':scope > .row > .toggle').setAttribute('aria-expanded', 'false');
        d.querySelector(':scope > .row > .toggle').textContent = '▸';
        return;
      }
      await expand(d);
    }

    // expand opens a container, loading its first page once.
    async function expand(d) {
      const n = d.cpNode;
      if (n.type !== 'object' && n.type !== 'array') return;
      const btn = d.querySelector(':scope > .row > .toggle');
      d.classList.add('open');
      btn.setAttribute('aria-expanded', 'true');
      btn.textContent = '▾';
      if (!d.cpKids) {
        d.cpKids = el('div', { class: 'children' });
        d.append(d.cpKids);
        d.cpStart = d.cpLoaded = 0; // the children shown: [cpStart, cpLoaded)
        d.cpLoading = loadPage(d);
      }
      await d.cpLoading;
    }

    // jumpTo shows the page of an array's children that holds index i, in
    // place of those shown: revealing element 149,999 loads one page, not
    // 300. A button above it shows the earlier ones.
    async function jumpTo(d, i) {
      await d.cpLoading;
      d.cpKids.replaceChildren();
      d.cpStart = d.cpLoaded = Math.floor(i / PAGE) * PAGE;
      d.cpLoading = loadPage(d);
      await d.cpLoading;
      earlierButton(d);
    }

    function earlierButton(d) {
      const old = d.cpKids.querySelector(':scope > button.earlier');
      if (old) old.remove();
      if (d.cpStart <= 0) return;
      d.cpKids.prepend(el('button', { type: 'button', class: 'earlier', onclick: (ev) => {
        ev.target.disabled = true;
        d.cpLoading = loadEarlier(d);
        d.cpLoading.catch((e) => { ev.target.disabled = false; showError(e.message); });
      } }, `Show ${Math.min(PAGE, d.cpStart)} earlier of ${d.cpNode.count}`));
    }

    async function loadEarlier(d) {
      const n = d.cpNode;
      const from = Math.max(0, d.cpStart - PAGE);
      const { data } = await api('node', { session: ctx.session, file: ctx.file, path: n.path, offset: from, limit: d.cpStart - from });
      const arr = n.type === 'array';
      const first = d.cpKids.querySelector(':scope > .node');
      for (const ch of data.children) d.cpKids.insertBefore(nodeEl(ch, ch.key, ch.jq, arr), first);
      d.cpStart = from;
      earlierButton(d);
    }

    async function loadPage(d) {
      const n = d.cpNode;
      const { data } = await api('node', { session: ctx.session, file: ctx.file, path: n.path, offset: d.cpLoaded, limit: PAGE });
      const old = d.cpKids.querySelector(':scope > button.more');
      if (old) old.remove();
      const arr = n.type === 'array';
      d.cpKids.append(...data.children.map((ch) => nodeEl(ch, ch.key, ch.jq, arr)));
      d.cpLoaded += data.children.length;
      d.cpMore = data.more && data.children.length > 0;
      if (d.cpMore) {
        d.cpKids.append(el('button', { type: 'button', class: 'more', onclick: (ev) => {
          ev.target.disabled = true;
          d.cpLoading = loadPage(d);
          d.cpLoading.catch((e) => { ev.target.disabled = false; showError(e.message); });
        } }, `Show ${Math.min(PAGE, n.count - d.cpLoaded)} more of ${n.count}`));
      }
    }

    function child(d, ptr) {
      if (!d.cpKids) return null;
      for (const c of d.cpKids.children) if (c.getAttribute('data-path') === ptr) return c;
      return null;
    }

    // reveal expands the tree down to ptr, paging as needed, and marks the
    // node as the hit.
    async function reveal(ptr) {
      let d = root;
      for (const p of ptrPrefixes(ptr)) {
        await expand(d);
        let c = child(d, p);
        const i = d.cpNode.type === 'array' ? Number(p.slice(p.lastIndexOf('/') + 1)) : NaN;
        if (!c && Number.isInteger(i) && (i < d.cpStart || i >= d.cpLoaded + PAGE)) {
          await jumpTo(d, i);
          c = child(d, p);
        }
        while (!c && d.cpMore) {
          d.cpLoading = loadPage(d);
          await d.cpLoading;
          c = child(d, p);
        }
        if (!c) throw new ApiError(`no node at ${p} in ${ctx.file}`);
        d = c;
      }
      for (const h of box.querySelectorAll('.node.hit')) h.classList.remove('hit');
      d.classList.add('hit');
      d.scrollIntoView({ block: 'center' });
      return d;
    }

    return { root, expand, reveal };
  }

  // ---- diff ----

  async function diffPage(gen, aKey = '', aFile = '', bKey = '', bFile = '') {
    setCrumbs({ text: `${sessionName(aKey)} / ${aFile}`, href: checkpointHref(aKey, aFile) }, { text: 'diff' },
      { text: `${sessionName(bKey)} / ${bFile}`, href: checkpointHref(bKey, bFile) });
    const [d, a, b] = await Promise.all([
      api('diff', { a_session: aKey, a_file: aFile, b_session: bKey, b_file: bFile }),
      api('checkpoint', { session: aKey, file: aFile }),
      api('checkpoint', { session: bKey, file: bFile }),
    ]).then((rs) => rs.map((r) => r.data));
    stale(gen);
    const count = { changed: 0, added: 0, removed: 0 };
    const marksA = {};
    const marksB = {};
    const mark = (marks, ptr, cls) => {
      if (ptr === null || ptr === undefined) return;
      (marks[ptr] = marks[ptr] || []).push(cls);
      if (ptr !== '') for (const p of ['', ...ptrPrefixes(ptr).slice(0, -1)]) (marks[p] = marks[p] || []).push('diff-inside');
    };
    for (const ch of d.changes) {
      count[ch.op] = (count[ch.op] || 0) + 1;
      if (ch.op !== 'added') mark(marksA, ch.a_path, ch.op === 'removed' ? 'diff-removed' : 'diff-changed');
      if (ch.op !== 'removed') mark(marksB, ch.b_path, ch.op === 'added' ? 'diff-added' : 'diff-changed');
    }
    const side = (x, label) => `${label}: ${sessionName(x.session)} / ${x.file} (step ${x.step}, ${x.kind})`;
    const treeA = el('div', { id: 'tree-a', class: 'tree' });
    const treeB = el('div', { id: 'tree-b', class: 'tree' });
    const total = d.changes.length;
    const list = el('ol', { id: 'diff-list' }, d.changes.map((ch) => el('li', { class: 'change ' + ch.op, 'data-path': ch.jq, tabindex: 0, onclick: (ev) => revealChange(ch, ev.currentTarget), onkeydown: (ev) => { if (ev.key === 'Enter') revealChange(ch, ev.currentTarget); } },
      el('span', { class: 'op' }, ch.op), el('code', { class: 'jq' }, ch.jq),
      ch.a !== null && ch.a !== undefined ? el('code', { class: 'old' }, ch.a) : null,
      ch.op === 'changed' ? el('span', { class: 'arrow' }, '→') : null,
      ch.b !== null && ch.b !== undefined ? el('code', { class: 'new' }, ch.b) : null)));
    view.replaceChildren(el('h1', {}, 'Diff'),
      el('p', { class: 'sides' }, el('a', { href: checkpointHref(d.a.session, d.a.file) }, side(d.a, 'A')), el('br'), el('a', { href: checkpointHref(d.b.session, d.b.file) }, side(d.b, 'B'))),
      el('p', { id: 'diff-summary' }, total === 0 ? 'no differences' : `${count.changed} changed, ${count.added} added, ${count.removed} removed${d.truncated ? ' (list truncated)' : ''}`),
      d.exact === false ? el('p', { id: 'diff-approx', class: 'note' }, 'These states are too big, or their arrays too deeply nested, for an edit script: arrays are compared index by index, so an element inserted in the middle shows as changes to the elements after it.') : null,
      list,
      el('div', { class: 'trees' },
        el('div', {}, el('h2', {}, 'A'), a.state ? treeA : el('p', { class: 'payload' }, 'byte payload')),
        el('div', {}, el('h2', {}, 'B'), b.state ? treeB : el('p', { class: 'payload' }, 'byte payload'))));
    const ta = a.state ? makeTree(treeA, { session: aKey, file: aFile, marks: marksA }, a.state) : null;
    const tb = b.state ? makeTree(treeB, { session: bKey, file: bFile, marks: marksB }, b.state) : null;
    await Promise.all([ta && ta.expand(ta.root), tb && tb.expand(tb.root)]);

    async function revealChange(ch, li) {
      for (const x of list.querySelectorAll('.change.selected')) x.classList.remove('selected');
      li.classList.add('selected');
      try {
        await Promise.all([ta && ch.a_path !== null ? ta.reveal(ch.a_path) : null, tb && ch.b_path !== null ? tb.reveal(ch.b_path) : null]);
      } catch (e) {
        showError(e.message);
      }
    }
    return null;
  }

  // ---- start ----

  async function start() {
    try {
      ({ data: info } = await api('info'));
    } catch (e) {
      view.setAttribute('data-view', 'error');
      view.setAttribute('data-ready', '1');
      showError(e.message);
      return;
    }
    document.getElementById('location').textContent = info.location;
    document.getElementById('nav-sessions').hidden = info.root !== 'sessions';
    window.addEventListener('hashchange', route);
    route();
    let busy = false;
    setInterval(async () => {
      if (document.hidden || busy || !current || !current.refresh) return;
      busy = true;
      const gen = generation;
      try {
        await current.refresh();
        if (gen === generation && errorBox.dataset.poll) { errorBox.removeAttribute('data-poll'); showError(''); }
      } catch (e) {
        if (gen === generation) { showError(e.message); errorBox.dataset.poll = '1'; }
      } finally {
        busy = false;
      }
    }, POLL_MS);
  }

  start();
})();
