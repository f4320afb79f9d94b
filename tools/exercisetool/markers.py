"""tools/exercisetool/markers.py: finding solution regions and replacing them with stubs.

What it is: the text transformation behind `tools/exercise start`, `reset` and `verify`. A
region is the lines between a begin marker and its end marker, both C++ comments on lines of
their own:

    // >>> exercise 2.1: the ring all-gather loop
    ... solution ...
    // <<< exercise 2.1

Stubbing keeps both markers (a learner greps for "exercise 2.1") and replaces what lies between
with the stub, indented like the begin marker: a message line (printf in __host__ __device__
code, which compiles for the host and in CUDA device code; fprintf(stderr) elsewhere), then the
catalog's failing statement. A file whose stub prints and that lacks <cstdio> gets the include
after its first #include line.

Invariants: regions do not nest; every begin has its end with the same id; stubbing a stubbed
region gives the same text (reset is idempotent); a file without regions is returned unchanged.

NCCL counterpart: none. Added in: curriculum (exercises).
"""
import re

BEGIN = re.compile(r"^(?P<indent>[ \t]*)// >>> exercise (?P<id>\d+\.\d+): (?P<title>.+?)\s*$")
END = re.compile(r"^[ \t]*// <<< exercise (?P<id>\d+\.\d+)\s*$")


class MarkerError(Exception):
    pass


def regions(text, path="<text>"):
    """[(id, title, indent, begin_line, end_line)] with 0-based indexes of the marker lines."""
    out, open_ = [], None
    for i, line in enumerate(text.split("\n")):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if open_:
                raise MarkerError(f"{path}:{i + 1}: exercise {b['id']} begins inside "
                                  f"exercise {open_[0]}")
            open_ = (b["id"], b["title"], b["indent"], i)
        elif e:
            if not open_ or open_[0] != e["id"]:
                raise MarkerError(f"{path}:{i + 1}: end of exercise {e['id']} without its begin")
            out.append(open_ + (i,))
            open_ = None
    if open_:
        raise MarkerError(f"{path}: exercise {open_[0]} is never closed")
    return out


def _c_string(s):
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")


def stub_lines(ex, stub, indent):
    msg = _c_string(ex.message())
    say = (f'printf("{msg}\\n");' if ex.device else f'fprintf(stderr, "{msg}\\n");')
    return [indent + say] + [indent + s for s in stub.split("\n")]


def stub(text, ex, path="<text>"):
    """text with every region of exercise `ex` replaced by its stubs."""
    lines = text.split("\n")
    mine = [r for r in regions(text, path) if r[0] == ex.id]
    if not mine:
        raise MarkerError(f"{path}: no region of exercise {ex.id}")
    if len(mine) != len(ex.stubs):
        raise MarkerError(f"{path}: exercise {ex.id} has {len(mine)} region(s) but "
                          f"{len(ex.stubs)} stub(s) in the catalog")
    for (rid, title, indent, b, e), s in reversed(list(zip(mine, ex.stubs))):
        if title != ex.title:
            raise MarkerError(f"{path}:{b + 1}: exercise {rid} is titled '{title}' here and "
                              f"'{ex.title}' in the catalog")
        lines[b + 1:e] = stub_lines(ex, s, indent)
    if not any(re.match(r"\s*#\s*include\s*<(cstdio|stdio\.h)>", l) for l in lines):
        first = next((i for i, l in enumerate(lines) if l.startswith("#include")), None)
        if first is None:
            raise MarkerError(f"{path}: no #include line to add <cstdio> after")
        lines.insert(first, "#include <cstdio>  // the exercise stubs print")
    return "\n".join(lines)
