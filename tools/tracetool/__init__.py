"""tools/tracetool: the implementation of tools/trace and tools/plot.

  model.py     reading trace files, putting every rank on one clock (load_run), writing them
               back as one file (merged_json)
  check.py     the test oracle: every published step was waited for, and never before it was
               published
  gantt.py     the Gantt picture of one operation (matplotlib)
  summary.py   per rank and operation: where the time went
  bench.py     reading nccl-tests / tccl_perf / compare_mpi.sh tables (tools/plot)
  mpl.py       importing matplotlib (Agg) and the byte-size axis both pictures share

Invariants: importing a module here never imports matplotlib (only drawing does), so the
oracle runs where matplotlib is not installed. User errors are raised as ToolError and turned
into one line and a non-zero exit by the scripts; a traceback means a bug in these tools.
Added in: stage 1 (observability).
"""


class ToolError(Exception):
    """A problem with the user's input or command line: printed as one line, exit 2."""


def read_input(path, what, binary=False):
    """The contents of an input file; a missing or unreadable one is a ToolError naming `what`
    the tool expected there ("a trace file", "a benchmark output")."""
    try:
        with open(path, "rb" if binary else "r", **({} if binary else {"errors": "replace"})) as f:
            return f.read()
    except FileNotFoundError:
        raise ToolError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ToolError(f"{path}: is a directory, not {what}") from None
    except OSError as e:
        raise ToolError(f"{path}: cannot read: {e.strerror}") from None
