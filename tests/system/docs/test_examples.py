"""The docs' examples against the code: every ``lakefeed ...`` line of a shell block parses
against the real CLI, and every Python and SQL block runs (``run_pages``).

A renamed command, a dropped option or a missing argument in a page fails here, not in front of a
reader. Command lines are parsed by click (``make_context``), never run.
"""

from __future__ import annotations

import ast
import re
import shlex
import textwrap
from pathlib import Path

import click
import pytest
from pyspark.sql import SparkSession

from lakefeed.cli.main import cli

from .run_pages import run_page

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_BLOCK = re.compile(r"```(?:bash|sh|shell|console|cron)\n(.*?)```", re.S)
REDIRECT = re.compile(r"\s+\d?>>?(?:&\d|\s*\S+)")  # >> file, 2>&1


def command_lines(text: str) -> list[str]:
    """``lakefeed ...`` commands of a page's shell (and crontab) blocks: continuations joined,
    comments and redirections cut, each part of a ``&&`` / ``|`` chain on its own."""
    found = []
    for block in SHELL_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
                if part.startswith("lakefeed "):
                    found.append(REDIRECT.sub("", part))
    return found


def _unparsed(ctx: click.Context) -> list[str]:
    """A group's subcommand and its arguments (click 8.2 renamed ``protected_args``)."""
    protected = getattr(ctx, "_protected_args", None)
    if protected is None:
        protected = ctx.protected_args
    return [*protected, *ctx.args]


def parse(line: str) -> None:
    """Parse ``line`` down to its leaf command; click raises on what it does not accept."""
    command: click.Command = cli
    try:
        ctx = command.make_context("lakefeed", shlex.split(line)[1:])
        rest = _unparsed(ctx)
        while isinstance(command, click.Group) and rest:
            sub = command.get_command(ctx, rest[0])
            if sub is None:
                raise click.UsageError(f"no command {rest[0]!r}", ctx)
            command, ctx = sub, sub.make_context(rest[0], rest[1:], parent=ctx)
            rest = _unparsed(ctx) if isinstance(sub, click.Group) else []
    except click.exceptions.Exit as done:  # --help, --version: printed, and fine
        if done.exit_code != 0:
            raise


LINES = [(page, line) for page in PAGES for line in command_lines(page.read_text())]


def test_the_docs_have_command_lines() -> None:
    assert len(LINES) > 50


@pytest.mark.parametrize(
    ("page", "line"), LINES, ids=[f"{p.name}:{line[:40]}" for p, line in LINES]
)
def test_command_line_parses(page: Path, line: str) -> None:
    try:
        parse(line)
    except click.ClickException as error:
        pytest.fail(f"{page.relative_to(ROOT)}: `{line}`: {error.format_message()}")


def test_a_wrong_line_is_caught() -> None:
    with pytest.raises(click.ClickException):
        parse("lakefeed kafka produce --rate 1000")  # the topic is missing
    with pytest.raises(click.ClickException):
        parse("lakefeed run examples/iot --no-such-option")
    parse("lakefeed --version")


INLINE = re.compile(r"`(lakefeed [^`]+)`")
FENCE = re.compile(r"^ *```.*?^ *```", re.S | re.M)


def inline_commands(text: str) -> list[str]:
    """``lakefeed ...`` in the prose's code spans: commands named in passing, often without
    their arguments (`lakefeed verify`, `lakefeed run --full-refresh TABLE`)."""
    return INLINE.findall(FENCE.sub("", text))


def unknown_names(line: str) -> list[str]:
    """The commands and options of ``line`` the CLI does not have. Arguments may be left out
    and UPPER-CASE words or ``...`` stand for what the reader fills in."""
    command: click.Command = cli
    words, unknown = shlex.split(line)[1:], []
    while words:
        word = words.pop(0)
        if word.startswith("-"):
            option = _option(command, word.split("=")[0])
            if option is None:
                unknown.append(f"{command.name} {word.split('=')[0]}")
            elif not option.is_flag and "=" not in word and words:
                words.pop(0)  # the option's value
        elif isinstance(command, click.Group) and not (word.isupper() or word == "..."):
            sub = command.commands.get(word)
            if sub is None:
                unknown.append(f"{command.name} {word}")
                break
            command = sub
    return unknown


def _option(command: click.Command, name: str) -> click.Option | None:
    if name == "--help":
        return click.Option(["--help"], is_flag=True)
    found = [p for p in command.params if isinstance(p, click.Option)]
    return next((p for p in found if name in (*p.opts, *p.secondary_opts)), None)


INLINE_LINES = [(page, line) for page in PAGES for line in inline_commands(page.read_text())]


def test_commands_named_in_prose_exist() -> None:
    """A command or option named in a sentence (not a whole command line) exists."""
    assert len(INLINE_LINES) > 50
    wrong = [(page.name, line, unknown_names(line)) for page, line in INLINE_LINES]
    assert [w for w in wrong if w[2]] == []


def test_a_wrong_name_in_prose_is_caught() -> None:
    assert unknown_names("lakefeed run --no-such-option") == ["run --no-such-option"]
    assert unknown_names("lakefeed tables vacuum") == ["cli tables"]
    assert unknown_names("lakefeed --log-level INFO run --mode backfill PIPELINE") == []
    assert unknown_names("lakefeed table ...") == []


PYTHON_BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)
SKIP = re.compile(r"^[ \t]*<!-- skip: next (.*?) -->\n", re.M)
# Blocks marked `<!-- skip: next "why" -->`: they need what a test cannot have (a cluster, S3,
# a broker on another host). A new one must be counted here, so the number cannot grow unseen.
SKIPPED = 10


def python_blocks() -> list[tuple[str, str]]:
    """Every Python block, but those marked skipped (shapes with ``...``, not code)."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in PYTHON_BLOCK.finditer(text):
            before = text[: block.start()].rstrip(" ").rsplit("\n", 2)[-2] + "\n"
            if not SKIP.match(before):
                found.append((page.name, textwrap.dedent(block.group(2))))
    return found


@pytest.mark.parametrize(("page", "block"), python_blocks())
def test_python_block_is_python(page: str, block: str) -> None:
    """Each Python block parses (quick, without Spark); the run below runs them."""
    try:
        ast.parse(block)
    except SyntaxError as error:
        pytest.fail(f"{page}: line {error.lineno} of a python block: {error.msg}")


def _has_blocks(page: Path) -> bool:
    return re.search(r"^ *```(python|sql)$", page.read_text(), re.M) is not None


RUN = [p for p in PAGES if _has_blocks(p)]  # every page with a block: none is left out


@pytest.mark.compat
@pytest.mark.parametrize("page", RUN, ids=[str(p.relative_to(ROOT)) for p in RUN])
def test_page_examples_run(page: Path, spark: SparkSession, tmp_path: Path) -> None:
    run_page(page, tmp_path, spark)


def test_skipped_blocks_are_counted_and_say_why() -> None:
    reasons = [r for page in PAGES for r in SKIP.findall(page.read_text())]
    assert all(re.fullmatch(r'"[^"]{10,}"', r) for r in reasons), reasons
    assert len(reasons) == SKIPPED


def _page_pipeline(page: Path, folder: Path) -> Path:
    """A page's first Python block and first SQL block, as the files of one pipeline."""
    text = page.read_text()
    python = re.search(r"```python\n(.*?)```", text, re.S)
    sql = re.search(r"```sql\n(.*?)```", text, re.S)
    assert python is not None and sql is not None
    folder.mkdir()
    (folder / "flows.py").write_text(python.group(1))
    (folder / "more.sql").write_text(sql.group(1))
    return folder


@pytest.mark.parametrize("page", ["README.md", "docs/get-started/quickstart.md"])
def test_first_pipeline_of_a_page_loads(page: str, tmp_path: Path) -> None:
    """The first pipeline a reader copies loads as lakefeed loads any pipeline (no Spark: the
    decorators and the SQL parser check names, arguments and the graph's datasets)."""
    from lakefeed import load_pipeline

    pipeline = load_pipeline([_page_pipeline(ROOT / page, tmp_path / "pipe")])
    assert {"bronze_readings", "silver_readings", "device_counts", "hot_readings"} <= set(
        pipeline.datasets
    )
