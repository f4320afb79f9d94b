#!/usr/bin/env python3
"""tests/tools/test_sitecheck.py: the tests of tools/site-check (the docs site in a browser).

What it is: unittest cases run by CTest (tests/tools/CMakeLists.txt):
  SiteCheckTest     (tools_site_check) the parts without a browser: the DevTools pipe's
                    framing (NUL-terminated JSON, messages split across reads), the page list
                    of a site folder, console events turned into problem lines (another tab's
                    events, duplicates, an IGNORED rule), and exit 2 with a message when there
                    is no site or no Chromium;
  BrowserTest       (tools_site_check_browser) one run of the checks in headless Chromium over
                    a tiny generated site with a broken image, a console.error call, an
                    uncaught exception and a search box that answers one term of two: each
                    must be reported, the good image and the found term must not. Exits 77
                    (CTest: skipped) with a message when Chromium is not installed.

Invariants: writes only to temporary directories that are removed (the browser's profile is
inside one); needs no build; leaves no browser process behind (site-check's own invariant).
NCCL counterpart: none. Added in: foundation (tools/), with tools/site-check.
"""

import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
sys.path.insert(0, TOOLS)

from sitecheck import cdp, check  # noqa: E402

# What marks a page as a Material page; the icon link, as Material's pages have one, keeps
# the browser from asking for /favicon.ico (a 404 here).
MATERIAL_PAGE = '<link rel="icon" href="good.png"><input class="md-search__input">'



def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def png_1x1():
    """A valid 1x1 PNG (one grey pixel), so the tiny site has an image that shows."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b""))


class SiteCheckTest(unittest.TestCase):
    def test_framing(self):
        first = cdp.encode({"id": 1, "method": "A"})
        self.assertEqual(first, b'{"id":1,"method":"A"}\0')
        wire = first + cdp.encode({"method": "B", "params": {}})
        decoder = cdp.Decoder()
        # The first message split across two reads, the second read also starting the next.
        self.assertEqual(decoder.feed(wire[:5]), [])
        self.assertEqual(decoder.feed(wire[5:len(first) + 3]), [{"id": 1, "method": "A"}])
        self.assertEqual(decoder.feed(wire[len(first) + 3:]), [{"method": "B", "params": {}}])
        self.assertEqual(decoder.feed(b""), [])

    def test_pages(self):
        with tempfile.TemporaryDirectory() as site:
            for page in ("index.html", "b/x.html", "a/index.html", "api/index.html"):
                write(os.path.join(site, page), MATERIAL_PAGE)
            write(os.path.join(site, "api/d/f.html"), "<p>Doxygen: no search box</p>")
            write(os.path.join(site, "raw.html"), "<p>no search box: not a Material page</p>")
            write(os.path.join(site, "a/notes.txt"), MATERIAL_PAGE)
            # Sorted, relative, "/"-separated; Material's pages, then all of Doxygen's api/;
            # other HTML files (no search box) and non-HTML files left out.
            self.assertEqual(check.site_pages(site), ["index.html", "a/index.html", "b/x.html",
                                                      "api/index.html", "api/d/f.html"])

    def test_format_problem(self):
        self.assertEqual(check.format_problem("a/b.html", "broken image: x.png"),
                         "a/b.html: broken image: x.png")
        self.assertEqual(check.format_problem("p.html", "uncaught exception: E\n    at f\n"),
                         "p.html: uncaught exception: E at f")

    def test_console_problems(self):
        def event(method, params, session="S"):
            return {"method": method, "params": params, "sessionId": session}

        events = [
            event("Runtime.consoleAPICalled",
                  {"type": "error", "args": [{"type": "string", "value": "bad"},
                                             {"type": "number", "value": 3}]}),
            event("Runtime.consoleAPICalled", {"type": "log", "args": [{"value": "fine"}]}),
            event("Runtime.consoleAPICalled", {"type": "error", "args": [{"value": "other"}]},
                  session="T"),  # another tab's
            event("Runtime.exceptionThrown", {"exceptionDetails": {
                "text": "Uncaught", "url": "http://h/x.js", "lineNumber": 4,
                "exception": {"description": "Error: boom\n    at x.js:5"}}}),
            event("Log.entryAdded", {"entry": {"level": "error", "text": "Failed to load",
                                               "url": "http://h/y.png"}}),
            event("Log.entryAdded", {"entry": {"level": "error", "text": "Failed to load",
                                               "url": "http://h/y.png"}}),  # once only
            event("Log.entryAdded", {"entry": {"level": "warning", "text": "deprecated"}}),
            # The one IGNORED rule: Doxygen's pages name no icon (check.IGNORED says why).
            event("Log.entryAdded", {"entry": {
                "level": "error", "url": "http://127.0.0.1:4000/favicon.ico",
                "text": "Failed to load resource: the server responded with a status of 404 "
                        "(File not found)"}}),
        ]
        self.assertEqual(check.console_problems(events, "S"), [
            "console.error: bad 3",
            "uncaught exception: Error: boom (http://h/x.js:5)",
            "console error: Failed to load (http://h/y.png)",
        ])
        saved = list(check.IGNORED)
        try:
            check.IGNORED.append((r"y\.png", "a test rule"))
            self.assertEqual(len(check.console_problems(events, "S")), 2)
            check.IGNORED[:] = []  # without the favicon rule, its 404 is a problem too
            self.assertEqual(len(check.console_problems(events, "S")), 4)
        finally:
            check.IGNORED[:] = saved

    def run_tool(self, *args, env=None):
        return subprocess.run([sys.executable, "-B", os.path.join(TOOLS, "site-check")] +
                              list(args), capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, **(env or {})))

    def test_cannot_check(self):
        with tempfile.TemporaryDirectory() as site:
            r = self.run_tool(site)
            self.assertEqual(r.returncode, 2)
            self.assertIn("has no index.html", r.stderr)
            write(os.path.join(site, "index.html"), MATERIAL_PAGE)
            r = self.run_tool(site, env={"TCCL_CHROMIUM": os.path.join(site, "no-such-browser")})
            self.assertEqual(r.returncode, 2)
            self.assertIn("no Chromium found", r.stderr)
            self.assertEqual(os.listdir(site), ["index.html"])  # no work folder left
        self.assertEqual(self.run_tool().returncode, 2)  # usage


# The tiny site: index.html with a good and a missing image, a console.error call and a search
# box that answers like Material's (meta text, then result links) and finds only "found";
# other.html throws; raw.html is not a Material page and is not opened.
INDEX = MATERIAL_PAGE + """
<div class="md-search-result__meta">Initializing search</div><ol id="list"></ol>
<img src="good.png"> <img src="missing.png">
<script>
console.error("planted error");
const box = document.querySelector("input.md-search__input");
box.addEventListener("keyup", () => setTimeout(() => {
  const meta = document.querySelector(".md-search-result__meta");
  const list = document.getElementById("list");
  list.innerHTML = "";
  if (!box.value) { meta.textContent = "Type to start searching"; return; }
  if (box.value !== "found") { meta.textContent = "No matching documents"; return; }
  meta.textContent = "1 matching document";
  list.innerHTML = '<li class="md-search-result__item"><a href="other.html#s">x</a></li>';
}, 30));
</script>
"""
OTHER = MATERIAL_PAGE + '<img src="good.png"><script>throw new Error("planted exception");</script>'


class BrowserTest(unittest.TestCase):
    def test_tiny_site(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = os.path.join(tmp, "site")
            write(os.path.join(site, "index.html"), INDEX)
            write(os.path.join(site, "other.html"), OTHER)
            write(os.path.join(site, "raw.html"), "<script>throw new Error('unseen')</script>")
            with open(os.path.join(site, "good.png"), "wb") as f:
                f.write(png_1x1())
            work = os.path.join(tmp, "work")
            os.mkdir(work)
            lines = []
            problems = check.run(site, cdp.find_chromium(), work, out=lines.append,
                                 searches=[("found", "other.html"), ("lost", "other.html")])
            text = "\n".join(lines)
            self.assertEqual(len(lines), len(problems) + 1, text)
            self.assertIn("index.html: broken image: missing.png", problems, text)
            self.assertIn("index.html: console.error: planted error", problems, text)
            # The 404 itself, as the browser's console shows it.
            self.assertTrue(any(p.startswith("index.html: console error: Failed to load")
                                and "missing.png" in p for p in problems), text)
            self.assertTrue(any(p.startswith("other.html: uncaught exception: Error: planted "
                                             "exception") for p in problems), text)
            self.assertTrue(any(p.startswith("index.html: search 'lost': other.html not among "
                                             "the results (No matching documents")
                                for p in problems), text)
            self.assertFalse(any("good.png" in p or "'found'" in p or "raw.html" in p
                                 or "unseen" in p for p in problems), text)
            self.assertEqual(len(problems), 5, text)
            self.assertRegex(lines[-1], r"^site-check: 2 pages, 3 images, 2 searches: "
                                        r"5 problem\(s\) \(\d+\.\d s\)$")


if __name__ == "__main__":
    if sys.argv[1:] == ["BrowserTest"] and not cdp.find_chromium():
        print("SKIP: Chromium is not installed (Debian: apt-get install chromium)")
        sys.exit(77)
    unittest.main(verbosity=2)
