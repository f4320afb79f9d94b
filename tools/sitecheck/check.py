"""tools/sitecheck/check.py: the built docs site checked as a reader sees it, in a browser.

What it is: the checks of tools/site-check. The site folder is served over HTTP on 127.0.0.1
(an ephemeral port; Material's search runs in a web worker that fetches
search/search_index.json, which file:// does not allow); one browser tab then opens every
page and, after its load event, reports
  - console errors: console.error/console.assert calls, uncaught exceptions, and the
    browser's own error entries (a 404 for a script, stylesheet or image, a blocked request);
  - broken images: every <img> must be complete with a natural width (lazy ones are made
    eager first, so an image below the fold is checked too);
and finally types one term per chapter into Material's search box (SEARCHES) and expects the
chapter's page among the results.

Invariants: a problem is one line, "page: what" (format_problem); nothing is ignored silently:
IGNORED lists each rule that drops a console message, with its reason. Pages are the .html
files of the MkDocs build that carry Material's search box (an HTML file copied from docs/ as
is is not a page of the site's own), and every .html file under api/, Doxygen's reference,
which tools/test's docs-api step writes into the same folder (no search box there; those
pages get the console and image checks only).
NCCL counterpart: none. Added in: foundation (tools/), for tools/site-check.
"""

import functools
import http.server
import json
import os
import re
import threading
import time
import urllib.parse

from . import cdp

# One search per chapter: (term, the page that must be among the results). The term is one a
# reader of that chapter would look for and that few other pages use, so the check fails when
# the chapter's page drops out of the index or out of the first results. If a chapter is
# rewritten and its term goes, pick another from its page and say so here.
SEARCHES = [
    ("tcclNeighborExchange", "chapters/stage1-p2p.html"),    # the chapter's exercise API
    ("busbw", "chapters/stage2-ring.html"),                  # "Where busbw comes from"
    ("treeNode", "chapters/stage3-tree.html"),               # a node of the double tree
    ("register_backend", "chapters/stage4-torch.html"),      # torch's backend registration
    ("ShmSegment", "chapters/stage5-transport-shm.html"),    # the SHM transport's segment
    ("gidType", "chapters/stage6-transport-ib.html"),        # RoCE's GID type (TCCL_IB_GID_*)
    ("FlightRecorder", "chapters/stage7-faults.html"),       # the flight recorder
]

# Console messages dropped on purpose: (regex on the message, why). Add a rule only with its
# reason; anything else a page logs as an error is a problem.
IGNORED = [
    # Doxygen's pages name no icon, so the browser asks for /favicon.ico at the site root
    # (once per run, from the first such page), which neither MkDocs nor Doxygen writes. A
    # reader sees the browser's default tab icon; nothing on the page is missing.
    (r"status of 404 .*\(http://127\.0\.0\.1:\d+/favicon\.ico\)$", "no icon on Doxygen pages"),
]

DOXYGEN_DIR = "api"  # Doxygen's output (see the invariants above)
SEARCH_BOX = "md-search__input"  # Material's search input: marks a Material page

PAGE_TIMEOUT = 20.0   # seconds for one page's load event (a page loads in ~0.1 s here)
IMAGE_TIMEOUT = 10.0  # seconds for a page's images to finish loading
SEARCH_TIMEOUT = 20.0  # seconds for one search (the first one waits for the index build)

# In the page: every <img>, made eager, awaited (load or error, or the timeout), then judged.
# An image "shows" when it is complete and has a natural width; an SVG without an intrinsic
# size may report width 0, so it also counts as shown when decode() succeeds.
IMAGES_JS = r"""
(async (timeoutMs) => {
  const imgs = Array.from(document.images);
  for (const img of imgs) if (img.loading === 'lazy') img.loading = 'eager';
  const settled = Promise.all(imgs.map(img => img.complete ? null : new Promise(r => {
    img.addEventListener('load', r); img.addEventListener('error', r); })));
  await Promise.race([settled, new Promise(r => setTimeout(r, timeoutMs))]);
  const out = [];
  for (const img of imgs) {
    let ok = img.complete && img.naturalWidth > 0;
    if (!ok && img.complete) { try { await img.decode(); ok = true; } catch (e) {} }
    out.push({src: img.getAttribute('src') || img.currentSrc, ok: ok});
  }
  return out;
})
"""

# In the page: clears the search box, then types `term` (Material reads the box on keyup) and
# waits until the result meta text is an answer ("N matching documents", "No matching
# documents"), not "Initializing search" (the worker still builds the index) or "Type to start
# searching" (the cleared box), or until the timeout. Returns the meta text and result links.
SEARCH_JS = r"""
(async (term, timeoutMs) => {
  const box = document.querySelector('input.md-search__input');
  if (!box) return {error: 'no search box (input.md-search__input) on this page'};
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const links = () => Array.from(document.querySelectorAll('.md-search-result__item a'))
    .map(a => a.href);
  const meta = () => ((document.querySelector('.md-search-result__meta') || {}).textContent
    || '').trim();
  const waiting = () => /initializ|type to start/i.test(meta());
  const type = value => { box.value = value;
    box.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true})); };
  const end = Date.now() + timeoutMs;
  type('');  // the previous term's results must go first: they could name this page too
  while ((links().length || !waiting()) && Date.now() < end) await sleep(20);
  type(term);
  while (waiting() && Date.now() < end) await sleep(20);
  // The list may be drawn just after the count ("No matching documents" draws none).
  while (!/^no /i.test(meta()) && !links().length && Date.now() < end) await sleep(20);
  const result = {meta: meta(), links: links()};
  type('');
  return result;
})
"""


def format_problem(page, what):
    """One problem as one line: "page: what" (the message's own lines joined)."""
    return "%s: %s" % (page, " ".join(str(what).split()))


def site_pages(site):
    """The site's pages as paths relative to `site`, sorted, "/"-separated: its Material
    pages (with the search box), then every .html file of Doxygen's api/ folder."""
    material, doxygen = [], []
    for root, dirs, files in os.walk(site):
        dirs.sort()
        rel_root = os.path.relpath(root, site).replace(os.sep, "/")
        in_api = rel_root == DOXYGEN_DIR or rel_root.startswith(DOXYGEN_DIR + "/")
        for name in sorted(files):
            if not name.endswith(".html"):
                continue
            page = name if rel_root == "." else rel_root + "/" + name
            if in_api:
                doxygen.append(page)
                continue
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                if SEARCH_BOX in f.read():
                    material.append(page)
    return material + doxygen


def ignored(message):
    """True when an IGNORED rule matches the console message."""
    return any(re.search(rule, message) for rule, _why in IGNORED)


def console_problems(events, session):
    """The console errors among CDP events of `session`, as messages (duplicates once)."""
    out = []
    for event in events:
        if event.get("sessionId") != session:
            continue
        method, params = event["method"], event.get("params", {})
        message = None
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            message = "console.%s: %s" % (params["type"], " ".join(str(a) for a in args))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            where = details.get("url", "")
            if where:
                where = " (%s:%s)" % (where, details.get("lineNumber", 0) + 1)
            message = "uncaught exception: %s%s" % (text.splitlines()[0] if text else "", where)
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            url = entry.get("url", "")
            message = "console error: %s%s" % (entry.get("text", ""),
                                               " (%s)" % url if url else "")
        elif method == "Inspector.targetCrashed":
            message = "the page crashed the browser's renderer"
        if message and not ignored(message) and message not in out:
            out.append(message)
    return out


class Server:
    """The site folder over HTTP on 127.0.0.1, an ephemeral port, in a daemon thread."""

    def __init__(self, site):
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # the browser reports failed requests itself
                pass

        handler = functools.partial(Quiet, directory=site)
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base = "http://127.0.0.1:%d/" % self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def url(self, page):
        return self.base + urllib.parse.quote(page)

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)


class Tab:
    """One browser tab, reused for every page: navigate, evaluate, collect its events."""

    def __init__(self, browser):
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget",
                                    {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(domain + ".enable")

    def send(self, method, params=None, timeout=20.0):
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def open(self, url):
        """Navigates and waits for the load event; the navigation's error text, or None."""
        self.browser.events()  # what the previous page left (read by the caller already)
        result = self.send("Page.navigate", {"url": url}, timeout=PAGE_TIMEOUT)
        if result.get("errorText"):
            return result["errorText"]
        self.browser.wait_event("Page.loadEventFired", self.session, timeout=PAGE_TIMEOUT)
        return None

    def call(self, function, *args, timeout):
        """Runs a JS function (a string) with JSON arguments, awaits it, returns its value."""
        expr = "(%s)(%s)" % (function.strip(), ", ".join(json.dumps(a) for a in args))
        result = self.send("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                                "returnByValue": True}, timeout=timeout + 5)
        if "exceptionDetails" in result:
            raise cdp.CdpError("evaluate: %s" % result["exceptionDetails"].get("text"))
        return result["result"].get("value")


def check_page(tab, server, page):
    """(problems, number of images) for one page."""
    problems = []
    error = tab.open(server.url(page))
    if error:
        return [format_problem(page, "does not load: " + error)], 0
    images = tab.call(IMAGES_JS, IMAGE_TIMEOUT * 1000, timeout=IMAGE_TIMEOUT)
    for image in images:
        if not image["ok"]:
            problems.append(format_problem(page, "broken image: " + str(image["src"])))
    for message in console_problems(tab.browser.events(), tab.session):
        problems.append(format_problem(page, message))
    return problems, len(images)


def check_searches(tab, server, start_page, searches):
    """Problems of the searches, typed into `start_page`'s search box one after another."""
    error = tab.open(server.url(start_page))
    if error:
        return [format_problem(start_page, "does not load (for the searches): " + error)]
    problems = []
    for term, expected in searches:
        found = tab.call(SEARCH_JS, term, SEARCH_TIMEOUT * 1000, timeout=SEARCH_TIMEOUT)
        where = "search %r" % term
        if found.get("error"):
            problems.append(format_problem(start_page, "%s: %s" % (where, found["error"])))
            continue
        pages = []
        for link in found["links"]:
            path = urllib.parse.unquote(urllib.parse.urlsplit(link).path).lstrip("/")
            if path not in pages:
                pages.append(path)
        if expected not in pages:
            problems.append(format_problem(
                start_page, "%s: %s not among the results (%s; first results: %s)" % (
                    where, expected, found["meta"] or "no result text",
                    ", ".join(pages[:5]) or "none")))
    # The page's own errors again (it was opened once already): run() keeps each line once.
    for message in console_problems(tab.browser.events(), tab.session):
        problems.append(format_problem(start_page, message))
    return problems


def run(site, binary, work, searches=None, out=print):
    """Checks the site; prints one line per problem and a summary; returns the problems."""
    searches = SEARCHES if searches is None else searches
    t0 = time.monotonic()
    pages = site_pages(site)
    if not pages:  # not a MkDocs Material build: nothing a reader would see was checked
        problem = format_problem(site, "no pages (no .html file with Material's search box)")
        out(problem)
        return [problem]
    problems = []
    n_images = 0
    server = Server(site)
    browser = None
    try:
        browser = cdp.Browser(binary, work)
        tab = Tab(browser)
        for page in pages:
            page_problems, images = check_page(tab, server, page)
            n_images += images
            problems += page_problems
        if searches:
            start = "index.html" if "index.html" in pages else pages[0]
            for line in check_searches(tab, server, start, searches):
                if line not in problems:
                    problems.append(line)
    finally:
        if browser:
            browser.close()
        server.close()
    for line in problems:
        out(line)
    out("site-check: %d pages, %d images, %d searches: %s (%.1f s)" % (
        len(pages), n_images, len(searches),
        "%d problem(s)" % len(problems) if problems else "no problems", time.monotonic() - t0))
    return problems
