"""Patterns from agents and grants, run in a linear-time engine (RE2).

Anything an agent or an operator sends as a pattern — ``wait_for.url_matches``,
``expect.url_matches``, a desktop ``title_pattern`` or ``wait_for.window_title``, a
grant's globs — is compiled here with Google's RE2 (``google-re2``), whose matching time
grows linearly with the subject, never exponentially: ``(a|a)*b`` against a long line of
``a`` costs microseconds, where Python's backtracking ``re`` would spin for minutes on the
event loop and freeze every session of the executor. What RE2 does not support
(backreferences, lookaround) is refused with :class:`PatternError`, which each package
turns into its own invalid-argument error naming the field.

This module is part of the shared base: it imports nothing of Handrail's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import re2

__all__ = ["MAX_PATTERN_CHARS", "PatternError", "compile_regex", "glob_matcher", "glob_to_regex", "url_predicate"]

#: Longest pattern accepted, in characters.
MAX_PATTERN_CHARS = 4096
# RE2's memory budget for one compiled pattern: a pattern that needs more is refused
# rather than made to run slowly.
_MAX_MEM = 8 << 20


class PatternError(ValueError):
    """A pattern RE2 cannot run: its syntax, a feature it lacks, or its size."""


@functools.lru_cache(maxsize=512)
def _compile(pattern: str, ignore_case: bool) -> Any:
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.case_sensitive = not ignore_case
    options.log_errors = False
    return re2.compile(pattern, options)


def compile_regex(pattern: str, *, ignore_case: bool = False) -> Any:
    """Compile ``pattern`` with RE2 (``search``, ``match``, ``fullmatch`` as ``re``).

    Raises:
        PatternError: RE2 cannot compile it (lookaround, backreferences, bad syntax), or it
            is too long.
    """
    if len(pattern) > 4 * MAX_PATTERN_CHARS:  # a glob's translation is longer than the glob
        raise PatternError(f"longer than {MAX_PATTERN_CHARS} characters")
    try:
        return _compile(pattern, ignore_case)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise PatternError(f"not a regular expression RE2 can run in linear time: {why}") from None


def url_predicate(pattern: str) -> Callable[[str], bool]:
    """A predicate that says whether a URL contains a match of ``pattern`` (``re.search``)."""
    regex = compile_regex(pattern)

    def matches(url: str) -> bool:
        return regex.search(url) is not None

    return matches


def glob_to_regex(glob: str) -> str:
    """An fnmatch-style glob (``*``, ``?``, ``[...]``, ``[!...]``) as an anchored RE2 pattern.

    The same language as :func:`fnmatch.fnmatchcase`, but run by RE2: Python's fnmatch
    builds a backtracking regular expression.
    """
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            if not out or out[-1] != ".*":  # runs of stars are one star
                out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal "["
                out.append(r"\[")
                continue
            body = glob[i:j]
            i = j + 1
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            escaped = "".join("\\" + ch if ch in "\\^[]" else ch for ch in body)
            out.append(f"[{'^' if negate else ''}{escaped}]")
        else:
            out.append(re2.escape(c))
    return "(?s:" + "".join(out) + r")\z"


@functools.lru_cache(maxsize=1024)
def glob_matcher(glob: str, *, ignore_case: bool = False) -> Callable[[str], bool]:
    """A predicate that says whether a whole string matches ``glob`` (compiled once, cached).

    Raises:
        PatternError: the glob is too long for RE2's budget.
    """
    regex = compile_regex(glob_to_regex(glob), ignore_case=ignore_case)

    def matches(value: str) -> bool:
        return regex.match(value) is not None

    return matches
