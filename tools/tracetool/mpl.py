"""tools/tracetool/mpl.py: importing matplotlib for the pictures, and the byte-size axis.

What it is: the two things `tools/trace png` and `tools/plot` share. pyplot() imports matplotlib
with the Agg backend (files only, no display needed), and, when this interpreter has no
matplotlib but Debian's /usr/bin/python3 does (python3-matplotlib, while `python3` on PATH is
another interpreter, e.g. pyenv's), runs the same command again under /usr/bin/python3 rather
than fail. size_label() and size_ticks() write message sizes as 8 B, 4 KiB, 16 MiB, 2 GiB.

Invariants: imported by the drawing code only, never by the oracle; the re-run happens at most
once (TCCL_TOOLS_REEXEC marks it) and only before anything was written.
NCCL counterpart: none. Added in: stage 1 (observability).
"""

import math
import os
import sys

from . import ToolError

DEBIAN_PYTHON = "/usr/bin/python3"
OUTPUT_FORMATS = (".png", ".svg", ".pdf")


def pyplot(reexec=False):
    """matplotlib.pyplot on the Agg backend, or a clear error when matplotlib is missing.

    reexec: may run the command line again under Debian's python3 (the tools' main() only;
    a test that imported these modules must never be replaced by another process)."""
    try:
        import matplotlib
    except ImportError:
        here = os.path.realpath(sys.executable)
        if (reexec and os.environ.get("TCCL_TOOLS_REEXEC") != "1"
                and os.access(DEBIAN_PYTHON, os.X_OK) and os.path.realpath(DEBIAN_PYTHON) != here):
            os.environ["TCCL_TOOLS_REEXEC"] = "1"
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.realpath(sys.argv[0])] + sys.argv[1:])
        raise ToolError(f"matplotlib is not installed for {sys.executable}: install Debian's "
                        f"python3-matplotlib (apt-get install python3-matplotlib)") from None
    matplotlib.use("Agg")  # files only: works without a display, in CI and over ssh
    import matplotlib.pyplot as plt
    return plt


def output_format(path):
    """The picture format -o asks for, from its suffix."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in OUTPUT_FORMATS:
        raise ToolError(f"{path}: unknown picture format '{ext or '(no suffix)'}': name the "
                        f"output .png, .svg or .pdf")
    return ext[1:]


def size_label(n):
    """8 -> "8 B", 4096 -> "4 KiB", 3 << 20 -> "3 MiB", 1536 -> "1.5 KiB"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:g} {unit}" if v >= 10 or v.is_integer() else f"{v:.3g} {unit}"
    return f"{n:g} B"


def size_ticks(sizes, most=16):
    """Tick positions for a log2 size axis: the sizes themselves when few (a -f 4 sweep), else
    powers of two spaced so that there are at most `most`."""
    sizes = sorted(set(s for s in sizes if s > 0))
    if not sizes:
        return []
    if len(sizes) <= most:
        return sizes
    lo, hi = math.floor(math.log2(sizes[0])), math.ceil(math.log2(sizes[-1]))
    step = max(1, math.ceil((hi - lo + 1) / most))
    return [2.0 ** e for e in range(lo, hi + 1, step)]
