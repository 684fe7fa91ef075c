"""Hadoop-style globs for the load path and ``pathGlobFilter``, and the folder walk they drive.

Spark resolves ``load("/landing/*/2026-*.{json,jsonl}")`` with Hadoop's globber: ``*``, ``?``,
``[abc]``, ``[^a]``, ``{a,b}`` alternation (nestable) and ``\\`` escapes, each matched within one
path segment. A segment that matches a folder selects every file below it; ``pathGlobFilter``
is then matched on the file name. Python's ``fnmatch`` has no alternation, hence this module.

A local folder is walked folder by folder (one ``listdir`` each). An ``s3://`` / ``s3a://``
prefix is listed once, recursively (ListObjectsV2 by prefix, paginated by pyarrow's client:
one request per 1,000 keys, no request per folder), and the same rules are applied to each
key's segments, so globs, ``pathGlobFilter``, hidden names and partition-style folders select
the same files as on disk.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

import pyarrow.fs as pafs

from lakefeed.connectors.files.errors import GlobError
from lakefeed.core import storage

GLOB_CHARS = re.compile(r"[*?\[{\\]")


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

    path: str  # as given (absolute path or URI), glob included
    base: str  # the longest leading folder without glob characters: where listing starts
    segments: tuple[re.Pattern[str], ...]  # one per path segment after ``base``
    name_filter: re.Pattern[str] | None  # pathGlobFilter
    recursive: bool

    @classmethod
    def of(cls, path: str, name_glob: str | None, recursive: bool) -> PathMatcher:
        scheme, _, rest = path.rpartition("://")  # PurePosixPath would fold a URI's '//'
        parts = PurePosixPath(rest).parts
        first = next((i for i, p in enumerate(parts) if GLOB_CHARS.search(p)), len(parts))
        return cls(
            path=path,
            base=(f"{scheme}://" if scheme else "") + str(PurePosixPath(*parts[:first])),
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


Found = tuple[str, int, int]
"""A new file: its path (a URI on object storage), size in bytes, modification time in ns."""


def scan(matcher: PathMatcher, cache: ListingCache) -> list[Found]:
    """Files under ``matcher`` not yet in ``cache`` (hidden names skipped)."""
    if storage.is_object_store(matcher.base):
        return select_objects(matcher, _list_objects(matcher), cache)
    found: list[Found] = []
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
                found.append((full, st.st_size, st.st_mtime_ns))
            elif kind != "gone":  # gone: deleted between listing and stat, look again later
                done.add(name)
    return found


def _list_objects(matcher: PathMatcher) -> Iterable[Found]:
    """Every object below the matcher's base, as (key relative to the base, size, mtime ns):
    one paginated listing of the prefix (only the base's own level without sub-folders)."""
    fs, base = storage.filesystem(matcher.base)
    deep = matcher.recursive or len(matcher.segments) > 1
    selector = pafs.FileSelector(base, recursive=deep, allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.type == pafs.FileType.File:
            yield info.path[len(base) + 1 :], int(info.size or 0), int(info.mtime_ns or 0)


def select_objects(
    matcher: PathMatcher, listed: Iterable[Found], cache: ListingCache
) -> list[Found]:
    """The new files among ``listed`` (keys relative to the matcher's base), with their URIs:
    the folder walk's rules applied to each key's segments. Keys seen before cost one set
    lookup; a key the matcher rejects is remembered as seen too."""
    found: list[Found] = []
    for key, size, mtime_ns in listed:
        folder, _, name = f"{matcher.base}/{key}".rpartition("/")
        done = cache.done.setdefault(folder, set())
        if name in done:
            continue
        segments = key.split("/")[:-1]
        wanted = all(
            visible(part) and matcher.wants_dir(depth, part) for depth, part in enumerate(segments)
        )
        if wanted and visible(name) and matcher.wants_file(len(segments), name):
            found.append((f"{folder}/{name}", size, mtime_ns))
        else:
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
