"""tools/sitecheck: the modules of tools/site-check (the docs site checked in a browser).

What it is: cdp.py (headless Chromium over the DevTools protocol on a pipe) and check.py (the
site served on 127.0.0.1, every page opened, its console errors and broken images, searches).
Invariants: standard library only; nothing runs at import.
NCCL counterpart: none. Added in: foundation (tools/).
"""
