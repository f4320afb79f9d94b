"""tools/exercisetool: the exercise tool's modules (catalog, markers, cli); see tools/exercise.

Added in: curriculum (exercises).
"""
