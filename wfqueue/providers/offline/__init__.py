"""The offline planner: deterministic planning from an analysis of the repository.

The provider class lives in ``provider.py``; the planning modules (understand,
area, changes) are pure and importable on their own.
"""
