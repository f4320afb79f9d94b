"""tools/sitecheck/cdp.py: headless Chromium driven over the DevTools protocol on a pipe.

What it is: the smallest client of the Chrome DevTools Protocol (CDP) that tools/site-check
needs, on the Python standard library alone (no selenium, no chromedriver). The browser is
started with --remote-debugging-pipe: it reads commands from its fd 3 and writes replies and
events to its fd 4, each message one JSON object followed by a NUL byte (encode/Decoder).
A reader thread splits the byte stream into messages; a command waits for the reply with its
id, and events that arrive meanwhile are kept in order for the caller (Browser.events).

Invariants:
  - every wait has a timeout (CdpError names what timed out); nothing blocks forever;
  - the browser runs in its own process group with HOME, TMPDIR, the profile, crash dumps and
    shared memory (--disable-dev-shm-usage: in TMPDIR instead of /dev/shm) all inside the work
    folder the caller gives; close() ends the whole group, always, even after an error, so no
    renderer or zygote is left behind and nothing is written to /tmp or /dev/shm;
  - Debian's /usr/bin/chromium is a shell wrapper that adds flags from /etc/chromium.d; the
    binary behind it is run directly when present, so the flags are exactly the ones below.
NCCL counterpart: none. Added in: foundation (tools/), for tools/site-check.
"""

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time

# The binary behind Debian's wrapper first, then the usual names on PATH.
CANDIDATES = ["/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome"]


class CdpError(Exception):
    """The browser did not answer in time, answered with an error, or went away."""


def find_chromium():
    """The browser to run: $TCCL_CHROMIUM if set, else the first candidate found; or None."""
    if os.environ.get("TCCL_CHROMIUM"):
        return shutil.which(os.environ["TCCL_CHROMIUM"])
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def encode(message):
    """One CDP message as the pipe carries it: compact JSON, then a NUL terminator."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\0"


class Decoder:
    """Splits the browser's byte stream into messages; a read may end mid-message."""

    def __init__(self):
        self._buf = b""

    def feed(self, data):
        """The complete messages that `data` finishes, in order (the rest is kept)."""
        self._buf += data
        *done, self._buf = self._buf.split(b"\0")
        return [json.loads(chunk) for chunk in done if chunk]


def browser_flags(work):
    """The command-line flags: headless, root-safe, and everything written under `work`."""
    return [
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--remote-debugging-pipe",
        "--user-data-dir=" + os.path.join(work, "profile"),
        "--crash-dumps-dir=" + os.path.join(work, "crash"),
        "--disable-crash-reporter",
        "--disable-breakpad",
        "--disable-dev-shm-usage",  # shared memory files in TMPDIR (the work folder)
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",  # no update or safe-browsing fetches: offline CI
        "--disable-component-update",
        "--disable-sync",
        "--mute-audio",
        "--window-size=1280,900",
        "about:blank",
    ]


class Browser:
    """A running headless browser: send() commands, read events(); close() when done."""

    def __init__(self, binary, work, start_timeout=30.0):
        self._work = work
        os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
        env = dict(os.environ, HOME=work, TMPDIR=os.path.join(work, "tmp"),
                   XDG_CONFIG_HOME=os.path.join(work, "config"),
                   XDG_CACHE_HOME=os.path.join(work, "cache"))
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        self._log = open(os.path.join(work, "chromium.log"), "wb")

        def pipes_at_3_and_4():  # in the child, before exec: the protocol's fixed fds
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        try:
            self._proc = subprocess.Popen(
                [binary] + browser_flags(work), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=subprocess.STDOUT, env=env, cwd=work, pass_fds=(3, 4),
                preexec_fn=pipes_at_3_and_4, start_new_session=True)
        finally:
            os.close(to_browser_r)  # the child holds its own copies now
            os.close(from_browser_w)
        self._next_id = 0
        self._replies = {}
        self._events = []
        self._inbox = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.send("Browser.getVersion", timeout=start_timeout)  # the browser is up and talking

    def _read(self):
        decoder = Decoder()
        while True:
            try:
                data = os.read(self._from_browser, 1 << 16)
            except OSError:
                data = b""
            if not data:
                self._inbox.put(None)  # EOF: the browser exited
                return
            for message in decoder.feed(data):
                self._inbox.put(message)

    def _pump(self, deadline):
        """Moves one message from the reader to replies/events; False on timeout."""
        try:
            message = self._inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if message is None:
            self._inbox.put(None)  # stays at EOF for every later wait
            raise CdpError("chromium exited (its log: %s)" % self.log_tail())
        if "id" in message:
            self._replies[message["id"]] = message
        else:
            self._events.append(message)
        return True

    def send(self, method, params=None, session=None, timeout=20.0):
        """Runs one command and returns its result; CdpError on an error reply or timeout."""
        self._next_id += 1
        mid = self._next_id
        message = {"id": mid, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._to_browser, encode(message))
        except OSError as e:
            raise CdpError("cannot write to chromium: %s" % e)
        deadline = time.monotonic() + timeout
        while mid not in self._replies:
            if not self._pump(deadline):
                raise CdpError("%s: no reply in %.0f s" % (method, timeout))
        reply = self._replies.pop(mid)
        if "error" in reply:
            raise CdpError("%s: %s" % (method, reply["error"].get("message", reply["error"])))
        return reply.get("result", {})

    def wait_event(self, method, session=None, timeout=20.0):
        """Waits for the next event `method` (of `session`); returns its params."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self._events[seen:]:
                if event["method"] == method and event.get("sessionId") == session:
                    self._events.remove(event)
                    return event.get("params", {})
            seen = len(self._events)
            if not self._pump(deadline):
                raise CdpError("%s: not seen in %.0f s" % (method, timeout))

    def events(self):
        """The events received so far, in order; the list is emptied."""
        while self._pump(time.monotonic()):
            pass
        out, self._events = self._events, []
        return out

    def log_tail(self, lines=5):
        try:
            with open(os.path.join(self._work, "chromium.log"), errors="replace") as f:
                return " | ".join(f.read().splitlines()[-lines:]) or "empty"
        except OSError:
            return "unreadable"

    def close(self):
        """Ends the browser and every process it started (its process group)."""
        try:
            if self._proc.poll() is None:
                try:
                    self.send("Browser.close", timeout=5.0)
                except CdpError:
                    pass
                try:
                    self._proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            try:  # renderers and the zygote share the group; some may outlive the parent
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.wait()
            os.close(self._to_browser)
            self._reader.join(timeout=5.0)
            os.close(self._from_browser)
            self._log.close()
