"""tools/stagetool: the implementation of tools/stage (chain, diffs, check, forward).

Added in: foundation (tools/).
"""
