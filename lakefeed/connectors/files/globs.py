"""Hadoop-style globs for the load path and ``pathGlobFilter``, and the folder walk they drive.

Spark resolves ``load("/landing/*/2026-*.{json,jsonl}")`` with Hadoop's globber: ``*``, ``?``,
``[abc]``, ``[^a]``, ``{a,b}`` alternation (nestable) and ``\\`` escapes, each matched within one
path segment. A segment that matches a folder selects every file below it; ``pathGlobFilter``
is then matched on the file name. Python's ``fnmatch`` has no alternation, hence this module.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import PurePosixPath

from lakefeed.errors import OptionError

_GLOB_CHARS = re.compile(r"[*?\[{\\]")


class GlobError(OptionError):
    """A glob that cannot be compiled (unbalanced ``{`` or ``[``)."""

    code = "GLOB"


def glob_regex(pattern: str) -> re.Pattern[str]:
    """One path segment's Hadoop glob as an anchored regular expression."""
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                raise GlobError(f"unclosed [ in glob {pattern!r}")
            body = pattern[i + 1 : end]
            negate = body[:1] in ("^", "!")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        elif char == "{":
            depth += 1
            out.append("(?:")
        elif char == "}" and depth:
            depth -= 1
            out.append(")")
        elif char == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(char))
        i += 1
    if depth:
        raise GlobError(f"unclosed {{ in glob {pattern!r}")
    return re.compile("".join(out), re.DOTALL)


@dataclass(frozen=True)
class PathMatcher:
    """Which files of a load path a source reads (picklable: travels with the options)."""

    path: str  # as given (absolute), glob included
    base: str  # the longest leading folder without glob characters: where listing starts
    segments: tuple[re.Pattern[str], ...]  # one per path segment after ``base``
    name_filter: re.Pattern[str] | None  # pathGlobFilter
    recursive: bool

    @classmethod
    def of(cls, path: str, name_glob: str | None, recursive: bool) -> PathMatcher:
        parts = PurePosixPath(path).parts
        first = next((i for i, p in enumerate(parts) if _GLOB_CHARS.search(p)), len(parts))
        return cls(
            path=path,
            base=str(PurePosixPath(*parts[:first])),
            segments=tuple(glob_regex(p) for p in parts[first:]),
            name_filter=glob_regex(name_glob) if name_glob else None,
            recursive=recursive,
        )

    def wants_dir(self, depth: int, name: str) -> bool:
        """Descend into folder ``name`` found ``depth`` levels below ``base``?"""
        if depth < len(self.segments):
            return self.segments[depth].fullmatch(name) is not None
        return self.recursive

    def wants_file(self, depth: int, name: str) -> bool:
        last = len(self.segments) - 1
        if depth < last or (depth == last and not self.segments[depth].fullmatch(name)):
            return False
        return self.name_filter is None or self.name_filter.fullmatch(name) is not None


def visible(name: str) -> bool:
    # Spark's file sources skip these too: temp files being written, _SUCCESS, .crc, ...
    return not name.startswith((".", "_"))


@dataclass
class ListingCache:
    """What earlier listings of one matcher learnt, per folder: names that are not new files
    (ingested, or files the matcher rejects) and names that are folders. A listing then does
    C-level set arithmetic on each folder's names and stats only names never seen before."""

    done: dict[str, set[str]]
    dirs: dict[str, set[str]]

    @classmethod
    def empty(cls) -> ListingCache:
        return cls({}, {})

    def remember(self, path: str) -> None:
        folder, name = os.path.split(path)
        self.done.setdefault(folder, set()).add(name)


def scan(matcher: PathMatcher, cache: ListingCache) -> list[tuple[str, os.stat_result]]:
    """Files under ``matcher`` not yet in ``cache`` (hidden names skipped), with their stat."""
    found: list[tuple[str, os.stat_result]] = []
    stack = [(matcher.base, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        done = cache.done.setdefault(folder, set())
        dirs = cache.dirs.setdefault(folder, set())
        fresh = set(names)
        fresh -= done
        for name in dirs.intersection(fresh):
            if matcher.wants_dir(depth, name):
                stack.append((os.path.join(folder, name), depth + 1))
        fresh -= dirs
        for name in fresh:
            if not visible(name):
                done.add(name)
                continue
            full = os.path.join(folder, name)
            kind, st = _kind(full)
            if kind == "dir":
                dirs.add(name)
                if matcher.wants_dir(depth, name):
                    stack.append((full, depth + 1))
            elif kind == "file" and st is not None and matcher.wants_file(depth, name):
                found.append((full, st))
            elif kind != "gone":  # gone: deleted between listing and stat, look again later
                done.add(name)
    return found


def _kind(path: str) -> tuple[str, os.stat_result | None]:
    """``dir``, ``file`` (with its stat), ``skip`` (a symlinked folder: not followed) or
    ``gone``."""
    try:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            return "dir", None
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(path)
            if stat.S_ISDIR(st.st_mode):
                return "skip", None
        return "file", st
    except FileNotFoundError:
        return "gone", None
