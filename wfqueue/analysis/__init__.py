"""Repository analysis for the offline planner: files, symbols, imports, ranking.

Only ``build_index`` reads the source files (and ``index_cache.cached_index``, which
keeps its result on disk while they are unchanged); everything else is a pure
function of its inputs, so the planner's decisions are reproducible.
"""

from wfqueue.analysis.files import CODE_LANGUAGES, SourceFile, list_source_files
from wfqueue.analysis.imports import js_imports, module_index_for, python_imports
from wfqueue.analysis.index import (
    RepoIndex,
    build_index,
    code_symbols,
    fan_in,
    fan_ins,
    importers_of,
    rank_files,
    rank_symbols,
    test_command_for,
)
from wfqueue.analysis.ranking import bm25_scores, tokenize
from wfqueue.analysis.symbols import Symbol, python_symbols, regex_symbols
from wfqueue.analysis.vocabulary import novel_terms

__all__ = [
    "CODE_LANGUAGES",
    "RepoIndex",
    "SourceFile",
    "Symbol",
    "bm25_scores",
    "build_index",
    "code_symbols",
    "fan_in",
    "fan_ins",
    "importers_of",
    "js_imports",
    "list_source_files",
    "module_index_for",
    "novel_terms",
    "python_imports",
    "python_symbols",
    "rank_files",
    "rank_symbols",
    "regex_symbols",
    "test_command_for",
    "tokenize",
]
