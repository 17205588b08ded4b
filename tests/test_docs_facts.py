"""What the README and docs/ state about the code, checked against the code.

These are the facts that drifted before (issue 39): the state topic's record type-id ranges
(``common/records.py``), the number of group API declarations and the APIs the README's table
says are served (``common/group_api_declarations.py``), and the commands and flags the docs name
(each ``groupcoord <subcommand> --flag`` must exist; a command line written out in full in a
shell block must parse as written). Each check collects every offending statement with the file
it is in, so one failure names all of them.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcoord import cli
from groupcoord.common import group_api_declarations, records
from groupcoord.common.group_api_declarations import DECLARATIONS, NOT_SERVED
from groupcoord.common.process_logging import add_log_level
from groupcoord.common.records import FIRST_OUTSIDE_TYPE_ID, STATE_TOPIC_RECORD_TYPES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def doc_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def docstring_of(relative: str) -> str:
    """A module's docstring, read from its source (no import: the operator's needs kopf)."""
    return ast.get_docstring(ast.parse((ROOT / relative).read_text())) or ""


# Module docstrings that state the same facts as the docs.
DOCSTRINGS = (
    "services/groupcoord/common/records.py",
    "services/groupcoord/common/group_api_declarations.py",
    "operator/groupcoord_operator/crd.py",
)


def texts() -> dict[str, str]:
    """Every text checked: path relative to the repository -> its text."""
    found = {p.relative_to(ROOT).as_posix(): p.read_text() for p in doc_files()}
    found.update({path: docstring_of(path) for path in DOCSTRINGS})
    return found


def paragraphs(text: str) -> Iterator[str]:
    """The text's paragraphs, each on one line (markdown wraps sentences over lines)."""
    for block in re.split(r"\n\s*\n", text):
        yield " ".join(line.strip() for line in block.splitlines())


def api_name(key_name: str) -> str:
    """``OFFSET_COMMIT`` -> ``OffsetCommit``, as the docs (and Kafka) write an API."""
    return "".join(part.title() for part in key_name.split("_"))


# --- record type ids -------------------------------------------------------------------------

# A range's label (its first word) -> the record modules whose types it may hold.
RANGE_LABELS = {
    "consumer": {"consumer_group_pb2"},
    "classic": {"classic_group_pb2", "offsets_pb2"},
    "runtime": {"runtime_pb2"},
    "share": {"share_group_pb2"},
    "streams": {"streams_group_pb2"},
}
RANGE = re.compile(r"(?<![\w.-])(\d+)-(\d+) (?:the )?([a-z]+)")


def type_modules() -> dict[int, str]:
    """Each product record type id -> the generated module of its key."""
    return {
        rt.type_id: rt.key_type.__module__.rsplit(".", 1)[1]
        for rt in STATE_TOPIC_RECORD_TYPES
        if rt.type_id < FIRST_OUTSIDE_TYPE_ID
    }


def range_tables(text: str) -> Iterator[list[tuple[int, int, str]]]:
    """Every statement of the id ranges: a paragraph naming a range that starts at 0 (as
    "0-19 consumer groups, 20-39 classic groups, ..."), as its (first, last, label) ranges."""
    for paragraph in paragraphs(text):
        found = [(int(a), int(b), label) for a, b, label in RANGE.findall(paragraph)]
        if any(first == 0 for first, _, _ in found):
            yield found


def range_errors(where: str, ranges: list[tuple[int, int, str]], ids: dict[int, str]) -> list[str]:
    errors = []
    for first, last, label in ranges:
        if label not in RANGE_LABELS:
            errors.append(f"{where}: range {first}-{last} has an unknown label {label!r}")
            continue
        for type_id in (i for i in ids if first <= i <= last):
            if ids[type_id] not in RANGE_LABELS[label]:
                errors.append(
                    f"{where}: type {type_id} ({ids[type_id]}) is not '{label}' as {first}-{last} says"
                )
    for a, b in ((a, b) for a in ranges for b in ranges if a < b):
        if a[0] <= b[1] and b[0] <= a[1]:
            errors.append(f"{where}: ranges {a[0]}-{a[1]} and {b[0]}-{b[1]} overlap")
    for type_id in ids:
        if not any(first <= type_id <= last for first, last, _ in ranges):
            errors.append(f"{where}: type {type_id} ({ids[type_id]}) is in none of the ranges stated")
    return errors


def test_record_type_ranges_stated_match_the_table() -> None:
    ids = type_modules()
    statements = [(where, ranges) for where, text in texts().items() for ranges in range_tables(text)]
    wheres = {where for where, _ in statements}
    # the places that state them (a check that finds nothing would pass on anything)
    assert {"services/groupcoord/common/records.py", "docs/DEVELOPING.md", "docs/architecture.md"} <= wheres
    errors = [e for where, ranges in statements for e in range_errors(where, ranges, ids)]
    assert errors == []


MENTION = re.compile(r"\((?:record )?type (\d+)\)|record type (\d+)|\brecords (\d+)-(\d+)\b")


def test_record_type_ids_named_exist() -> None:
    """Ids named alone ("(type 27)", "records 61-64", "record type 1000") are product ids in
    the table, or ids outside the product's (from FIRST_OUTSIDE_TYPE_ID on)."""
    ids = type_modules()
    named = []
    for where, text in texts().items():
        for paragraph in paragraphs(text):
            for m in MENTION.finditer(paragraph):
                one = m.group(1) or m.group(2)
                span = [int(one)] if one else list(range(int(m.group(3)), int(m.group(4)) + 1))
                named.extend((where, i) for i in span)
    assert len(named) >= 5  # pending offsets (27), markers (28), the epoch marker (40), share records...
    wrong = [(where, i) for where, i in named if i not in ids and i < FIRST_OUTSIDE_TYPE_ID]
    assert wrong == []
    assert records.PENDING_TXN_OFFSET_TYPE_ID in {i for _, i in named}


# --- group API declarations ------------------------------------------------------------------

NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
)
NUMBERS = {word: n for n, word in enumerate(NUMBER_WORDS.split(" "))}
SHARE_APIS = [api_name(api.key.name) for api in DECLARATIONS if "SHARE" in api.key.name]


def number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word.lower()]


def test_declaration_counts_stated_match_the_declarations() -> None:
    """A count of declarations in a sentence about share groups ("seven declarations") is the
    share-group APIs' count, otherwise every declaration's; the README's "(N, one declaration
    each" is every one."""
    stated = []
    for where, text in texts().items():
        for paragraph in paragraphs(text):
            for m in re.finditer(r"\b(\w+) declarations\b|\((\d+), one declaration each", paragraph):
                if m.group(2):
                    stated.append((where, int(m.group(2)), len(DECLARATIONS)))
                elif m.group(1).isdigit() or m.group(1).lower() in NUMBERS:
                    sentence = paragraph[: m.start()].rsplit(". ", 1)[-1]
                    expected = len(SHARE_APIS) if "share" in sentence.lower() else len(DECLARATIONS)
                    stated.append((where, number(m.group(1)), expected))
    assert {"README.md", "docs/architecture.md"} <= {where for where, _, _ in stated}
    assert [s for s in stated if s[1] != s[2]] == []


def test_the_declarations_docstring_names_every_share_group_api() -> None:
    doc = " ".join(group_api_declarations.__doc__.split())
    m = re.search(r"one :class:`GroupApi` here per API, (\w+) of them \(([^)]*)\)", doc)
    assert m, "the docstring no longer says how many declarations share groups added"
    assert number(m.group(1)) == len(SHARE_APIS)
    assert [name.strip() for name in m.group(2).split(",")] == SHARE_APIS


def served_table() -> str:
    text = README.read_text()
    section = text.split("## What is served", 1)[1].split("\n## ", 1)[0]
    return section


def test_the_readme_table_lists_what_is_declared() -> None:
    """Every API in the README's table with the versions declared, and none other; the APIs
    not served are said to be so."""
    served = {api_name(api.key.name): api.versions for api in DECLARATIONS}
    table = served_table()
    stated = {}
    for name, low, high in re.findall(r"`(\w+)` v(\d+)(?:-(\d+))?", table):
        stated[name] = (int(low), int(high or low))
    assert stated == served
    if NOT_SERVED:
        refused = next(line for line in table.splitlines() if "not yet" in line)
        assert all(f"`{api_name(key.name)}`" in refused for key in NOT_SERVED)


# --- commands and flags ----------------------------------------------------------------------


def subcommand_parser(name: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"groupcoord {name}", exit_on_error=False)
    importlib.import_module(cli.SUBCOMMANDS[name]).add_arguments(parser)
    return parser


def operator_parser() -> argparse.ArgumentParser:
    """``python -m groupcoord_operator``'s parser, as its ``__main__`` builds it."""
    from groupcoord_operator import command

    parser = argparse.ArgumentParser(prog="groupcoord_operator", exit_on_error=False)
    add_log_level(parser)
    command.add_arguments(parser)
    return parser


@pytest.fixture(scope="module")
def parsers() -> dict[str, argparse.ArgumentParser]:
    """The top-level parser ("") and one per subcommand, built from their modules (the
    operator's and capacity's need their extras, which the test venv has)."""
    top = argparse.ArgumentParser(prog="groupcoord", exit_on_error=False)
    add_log_level(top)
    return {"": top, **{name: subcommand_parser(name) for name in cli.SUBCOMMANDS}}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}


def children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for child in children(parser).values():
        yield from every_parser(child)


def shell_lines(text: str) -> Iterator[str]:
    """The lines of the text's fenced code blocks, a backslash continuation joined."""
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        yield from block.replace("\\\n", " ").splitlines()


def code_spans(text: str) -> Iterator[str]:
    for paragraph in paragraphs(re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)):
        yield from re.findall(r"`([^`]+)`", paragraph)


# `groupcoord` as a command: a word of its own (or an image name, `groupcoord:local`, whose
# arguments are the command's), not `groupcoord_spark`, `groupcoord.cli` or `groupcoord-capacity`.
COMMAND = re.compile(r"(?:^|(?<=[\s/]))groupcoord(?::[\w.-]+)?(?=\s)")
END = {"#", "&&", "||", ";", "|", ">", "2>&1"}


def commands(text: str) -> Iterator[tuple[list[str], bool]]:
    """Every ``groupcoord ...`` the text names: its words, and whether it is written out in
    full (a shell line with no placeholder or alternatives), so that it must parse as written."""
    for line, whole in [
        *((line, True) for line in shell_lines(text)),
        *((span, False) for span in code_spans(text)),
    ]:
        for m in COMMAND.finditer(line):
            rest = line[m.end() :]
            try:
                words = shlex.split(rest, comments=True)
            except ValueError:
                words = rest.split()
            cut = next((i for i, w in enumerate(words) if w in END), len(words))
            words = words[:cut]
            # placeholders: `...`, `[--opt]`, `a|b`, `<name>`, `HOST:PORT`, `N`
            full = whole and not re.search(r"\.\.\.|\[|\||<\w+>|\b[A-Z][A-Z_:]*\b", rest.split("#", 1)[0])
            yield words, full


def walk(words: list[str], parsers: dict[str, argparse.ArgumentParser]) -> tuple[str, list[str]] | None:
    """(subcommand, problems) for one named command; None when the words after ``groupcoord``
    are not a command of ours (``docker build -t groupcoord .``)."""
    top = parsers[""]
    i = 0
    while i < len(words) and words[i].startswith("--"):  # global options come before the subcommand
        flag = words[i].split("=", 1)[0]
        if flag not in options(top):
            return "", [f"groupcoord {flag} is no option"]
        i += 1 if "=" in words[i] or flag in {"-h", "--help"} else 2
    if i == len(words):
        return ("", []) if i else None
    name = words[i]
    if name not in cli.SUBCOMMANDS:
        return None
    current = [parsers[name]]
    known = options(top) | options(parsers[name])
    problems = []
    for word in words[i + 1 :]:
        word = word.strip("[]()")
        choices = {k: v for parser in current for k, v in children(parser).items()}
        if word.startswith("--"):
            for flag in word.split("=", 1)[0].split("/"):
                flag = flag.rstrip(",.;:")
                glob = flag.endswith("*") and any(k.startswith(flag[:-1]) for k in known)
                if flag and flag not in known and not glob:
                    problems.append(f"groupcoord {' '.join(words)}: {flag} is no option of it")
        elif choices and word.split("|")[0] in choices:
            current = [choices[w] for w in word.split("|") if w in choices]
            problems += [f"groupcoord {name}: no action {w!r}" for w in word.split("|") if w not in choices]
            for parser in current:
                known |= options(parser)
    return name, problems


def test_every_groupcoord_command_named_in_the_docs_exists(
    parsers: dict[str, argparse.ArgumentParser],
) -> None:
    """Every ``groupcoord <subcommand> --flag`` (in a shell block or inline) names a subcommand,
    actions and flags the CLI has, wherever they moved in the docs."""
    named: dict[str, int] = {}
    problems = []
    for where, text in texts().items():
        for words, _ in commands(text):
            result = walk(words, parsers)
            if result is None:
                continue
            name, found = result
            named[name] = named.get(name, 0) + 1
            problems += [f"{where}: {p}" for p in found]
    assert set(cli.SUBCOMMANDS) - {"capacity"} <= set(named), named  # the check saw the docs
    assert problems == []


def test_every_command_written_out_parses_as_written(parsers: dict[str, argparse.ArgumentParser]) -> None:
    """A shell line of the docs with no placeholder (``...``, ``[--opt]``, ``a|b``) is a command
    a reader copies: it must parse with the real parser, values and required arguments included."""
    ran = []
    problems = []
    for where, text in texts().items():
        for words, full in commands(text):
            name = next((w for w in words if w in cli.SUBCOMMANDS), None)
            if not full or name is None or walk(words, parsers) is None:
                continue
            at = words.index(name)
            ran.append(name)
            try:
                parsers[""].parse_args(words[:at])
                parsers[name].parse_args(words[at + 1 :])
            except (argparse.ArgumentError, SystemExit) as exc:
                problems.append(f"{where}: groupcoord {' '.join(words)}: {exc}")
    assert {"up", "status", "groups"} <= set(ran), ran  # the quick start's, at least
    assert problems == []


# Flags of other programs that the docs name bare (in backticks, without their program).
OTHER_PROGRAMS = {
    "--cert": "tansu",
    "--key": "tansu",
    "--authentication": "tansu",
    "--list": "python bench/run.py",
    "--build-arg": "docker build",
    "--network": "docker build",
    "--subprocesses": "py-spy",
    "--idle": "py-spy",
    "--describe": "kafka-consumer-groups.sh",
    "--group": "kafka-consumer-groups.sh",
    "--reset-offsets": "kafka-consumer-groups.sh",
    "--delete-offsets": "kafka-consumer-groups.sh",
    "--ack-pattern": "VerifiableShareConsumer",
}


def test_every_bare_flag_in_the_docs_is_an_option_of_ours(
    parsers: dict[str, argparse.ArgumentParser],
) -> None:
    """`--drain-timeout`, `--listener-ssl-cafile`, `--to-*`: a flag named on its own is an
    option of some groupcoord subcommand (or of ``python -m groupcoord_operator``)."""
    ours = set().union(*(options(p) for parser in parsers.values() for p in every_parser(parser)))
    ours |= options(operator_parser())
    unknown = []
    for where, text in texts().items():
        for span in code_spans(text):
            if not span.startswith("--"):
                continue
            for flag in re.findall(r"--[\w*-]+", span.split(" ", 1)[0]):
                if flag in ours or flag in OTHER_PROGRAMS:
                    continue
                if flag.endswith(("*", "-")) and any(o.startswith(flag.rstrip("*")) for o in ours):
                    continue
                unknown.append(f"{where}: {flag}")
    assert unknown == []


def test_operator_commands_named_exist() -> None:
    """``python -m groupcoord_operator --print-crd`` (the CRD's regeneration, crd.py)."""
    parser = operator_parser()
    named = []
    for where, text in texts().items():
        for m in re.finditer(r"python -m groupcoord_operator((?: --[\w-]+)*)", text):
            for flag in m.group(1).split():
                named.append((where, flag))
    assert ("operator/groupcoord_operator/crd.py", "--print-crd") in named
    assert [(w, f) for w, f in named if f not in options(parser)] == []


def bench_names() -> set[str]:
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.benchmarks())


def test_every_benchmark_named_exists() -> None:
    """``python bench/run.py NAME`` names a benchmark the runner lists."""
    names = bench_names()
    named = [
        (where, m.group(1))
        for where, text in texts().items()
        for m in re.finditer(r"python bench/run\.py\s+(\w[\w-]*)", text)
    ]
    assert len(named) >= 5
    assert [(w, n) for w, n in named if n not in names and n != "NAME"] == []


# --- links -----------------------------------------------------------------------------------


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings: lowercased, punctuation dropped, spaces as -."""
    markdown = re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    }


def test_every_link_between_the_docs_arrives() -> None:
    """A relative link of the README, docs/ or helm/README.md names a file that exists and, with
    ``#anchor``, a heading it has (sections moved out of the README must take their links along)."""
    broken = []
    for page in [*doc_files(), ROOT / "helm" / "README.md"]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


# --- paths -----------------------------------------------------------------------------------

# A path in backticks: from the repository's root, or (as the docs shorten them) from
# services/groupcoord/ (`gateway/...`, `common/...`), its coordinator/ (`runtime/...`) or the
# core (`consumer/...`).
SHORT_PATH_BASES = {
    "services/groupcoord/": (
        "gateway",
        "coordinator",
        "common",
        "controlplane",
        "authorization",
        "admin",
        "observability",
    ),
    "services/groupcoord/coordinator/": ("core", "runtime", "server"),
    "services/groupcoord/coordinator/core/": ("consumer", "classic", "share", "migration"),
}
REPO_DIRS = (
    "docs",
    "tests",
    "scripts",
    "helm",
    "services",
    "operator",
    "spark",
    "bench",
    "proto",
    "testing",
    "requirements",
)
PATH_DIRS = "|".join((*REPO_DIRS, *(d for dirs in SHORT_PATH_BASES.values() for d in dirs)))
NAMED_PATH = re.compile(rf"`((?:{PATH_DIRS})/[\w./*-]*\w)`")
def test_every_file_the_docs_name_exists() -> None:
    """`gateway/groups/serving.py`, `tests/e2e/test_invisible_failover.py`: a file or folder the
    docs name is there (code that moves takes the docs along)."""
    missing = []
    for path in [*doc_files(), ROOT / "helm" / "README.md"]:
        where = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        for named in sorted(set(NAMED_PATH.findall(text))):
            first = named.split("/", 1)[0]
            bases = [""] + [base for base, dirs in SHORT_PATH_BASES.items() if first in dirs]
            if not any(list(ROOT.glob(base + named)) for base in bases):
                missing.append(f"{where}: {named}")
    assert missing == []
