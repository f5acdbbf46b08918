"""What every parser of :mod:`ocibench.figures.outputs` shares: the verdicts a parser
raises (:class:`SanityError`, :class:`Unjudged`, :class:`NotThisOutput`), what it returns
(:class:`Measurement`), the lines it reads (launcher prefixes removed, :func:`output_lines`),
the crash words, and the readers of numbers and size tables."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import BinaryIO, Union

from ocibench import benchmarks, metrics

# Union, not "|": a module-level alias is evaluated at import, and Python 3.9 has no "|".
Values = dict[Union[int, str], float]


class SanityError(ValueError):
    """The output is not that of a complete, correct run; the message is one line."""


class Unjudged(SanityError):
    """The output could not be read to a verdict, and nothing shows the run broken: a
    format the parser does not know (the message names the line), or a method that
    cannot be compared with the documented one.  ``ocibench evaluate`` calls it
    UNJUDGED (exit 3), never FAIL; a live check, which runs our own command line,
    fails with "could not judge".  A subclass of SanityError so that any caller that
    does not tell the two apart still refuses the output rather than passing it."""


class NotThisOutput(Unjudged):
    """The output is not this check's: another benchmark's (the message names it, and
    the line that says so), or a format this parser does not know.  One rule in every
    parser: UNJUDGED, never FAIL, and only the launcher's and the shell's crash words
    (:data:`PROCESS_ENDED`) are read in it, never the words of the check's own
    programs, which another program's output may hold for reasons of its own."""


#: The largest output read.  A benchmark prints a few KiB (IMB's whole -msglog 3:28
#: table with one Allreduce table per process count stays under 100 KiB); 16 MiB is
#: more than a hundred times any of them with mpirun's noise, and small enough that a
#: wrong file (a core dump, a tarball) is refused at once, never read into memory.
MAX_OUTPUT_BYTES = 16 * 2**20


class OutputTooLarge(ValueError):
    """A file is larger than MAX_OUTPUT_BYTES: not a benchmark's output."""


def read_output(stream: BinaryIO, name: str) -> str:
    """At most MAX_OUTPUT_BYTES of ``stream`` as text; reading stops there, so a
    100 MB file costs 16 MiB, not 100 MB."""
    data = stream.read(MAX_OUTPUT_BYTES + 1)
    if len(data) > MAX_OUTPUT_BYTES:
        raise OutputTooLarge(f"{name} is larger than {MAX_OUTPUT_BYTES // 2**20} MiB: "
                             "not a benchmark's output (those are a few KiB)")
    return data.decode(errors="replace")


@dataclass(frozen=True)
class Measurement:
    """What one run measured: ``values`` for the check's primary metric, ``extra`` for
    any other metric the same output carries (IMB PingPong's Mbytes/sec column)."""

    check: str
    metric: str                      # latency | bandwidth | busbw
    unit: str                        # us | MB/s | GB/s
    values: Values                   # message size (or kernel, or nccl column) -> value
    extra: dict[str, Values] = field(default_factory=dict)   # metric -> values
    #: For values keyed by name (nccl-tests' busbw columns): the message size they are at.
    size: int | None = None
    #: How the run's method differs from the seeds' where that makes its values
    #: incomparable with a documented figure ("one process drove 2 GPUs (-g 2); the
    #: figures are one rank per GPU: mpirun -np 2 ... -g 1"); None when it does not.
    method: str | None = None
    #: How the run was measured at a disadvantage its figures were not, one that can only
    #: make it worse (IMB started at the judged size, without the sweep's smaller sizes
    #: before it: a cold start): a value that still meets its figure holds; one that
    #: misses it is not judged, since the disadvantage may be why.  None when none.
    handicap: str | None = None
    #: The GPU vendor whose software printed the output, where it says so (OMB's title
    #: tag, the collective tests' or library's version banner); None where it does not.
    vendor: str | None = None
    #: metric -> key -> every sample of a run that repeated itself (nccl-tests -N):
    #: ``values`` then holds each key's median, and these show the spread.
    samples: dict[str, dict[int | str, tuple[float, ...]]] = field(default_factory=dict)
    #: The GPU the output says it ran on, and the line that says so ("Using HIP device
    #: AMD Instinct MI300X"): compared with the shape's GPU (ocibench.figures.evaluate).
    device: str | None = None
    device_line: str | None = None

    def series(self) -> dict[str, Values]:
        """metric -> values, the primary metric first."""
        return {self.metric: self.values, **self.extra}

    def units(self) -> dict[str, str]:
        """metric -> the unit its values are in (``extra`` metrics in their usual one)."""
        return {**{m: metrics.default_unit(m) for m in self.extra}, self.metric: self.unit}


#: metric -> the unit OMB, IMB, STREAM and nccl-tests print it in.
UNITS = {name: metrics.default_unit(name) for name in metrics.METRICS}

#: Printed only when a process of the run ended abnormally, by the shell, the launcher
#: (mpirun, prterun, srun, Slurm) or MPI, whatever the program: read in any output, since
#: a run may die before it printed anything of its own.  Case matters except where (?i)
#: says otherwise: "Killed" is the shell's word for a killed job, not the verb in a log
#: sentence.
PROCESS_ENDED = tuple(re.compile(p, re.MULTILINE) for p in (
    r"Segmentation fault",
    r"core dumped",
    r"Bus error",
    # the shell's words for the other signals that end a program (bash's siglist)
    r"Illegal instruction",
    r"Floating point exception",
    r"\bAborted\b",
    r"\bKilled\b",
    r"exited on signal \d+",
    r"(?:mpirun|prterun) noticed that process",
    r"prterun has exited",
    r"MPI_ABORT",
    r"BAD TERMINATION",
    # [ \t], not \s: \s crosses newlines, and "^\s*" retried at every line start of
    # a run of blank lines is quadratic (10 M blank lines took minutes)
    r"^[ \t]*Abort\(\d+\)",
    r"returned\s+a\s+non-zero\s+exit\s+code",
    r"srun: error:",
    r"DUE TO TIME LIMIT",
    r"oom-kill",
))

def failure_words(*patterns: str) -> tuple[re.Pattern, ...]:
    """A family's failure words (its module's ``FAILED``): what its programs print when
    they failed, read only in an output recognised as that family's, after its parser
    has read it.  The package gathers them (``FAILED_BY_FAMILY``, ``CRASH_MARKERS``)."""
    return tuple(re.compile(p, re.MULTILINE) for p in patterns)


#: What launchers put before every line of a rank's output, removed in one place
#: before any parser looks at a line:
#: * ``srun --label``: the task id and ": ", padded to the width of the largest id;
#: * ``mpirun --tag-output`` "[1,0]<stdout>:", ``--timestamp-output``
#:   "Mon Jan  6 10:00:00 2025<stdout>:", or both "<ctime>[1,0]<stdout>:" (Open MPI
#:   4's orte/mca/iof/base/iof_base_output.c and PRRTE's prte_iof_base_setup_output:
#:   snprintf(starttag, ..., "%s[%s,%s]<%s>:", ctime, jobid, rank, "stdout")).
#: Bounded repetitions only, so that the pattern stays linear on any input.
_LAUNCHER_PREFIX = re.compile(
    r"^[ \t]*(?:\d{1,7}: )?(?:[^<\n]{0,120}?<std(?:out|err|diag)>:[ \t]?)?", re.MULTILINE)
#: mpirun --tag-output tags every chunk it forwards, not every line: a line the program
#: wrote in pieces carries the tag again where each piece starts (nccl-tests writes a
#: results line as its size, then each half: "... sum -1[1,0]<stdout>:    85.14 ...").
#: The tag alone is removed there; the pieces joined are what the program printed.
_TAG_INSIDE_LINE = re.compile(r"\[\d{1,9},\d{1,9}\]<std(?:out|err|diag)>:")
#: Runs of blank (or whitespace-only) lines, collapsed to one newline: linear, since
#: [ \t\r\f\v] cannot match the newline that ends each repetition.
_BLANK_LINES = re.compile(r"(?:[ \t\r\f\v]*\n)+")
#: A digit that is not ASCII (full-width "１", Arabic-Indic "١", ...): Python's int()
#: and float() and re's \d would read them as numbers; no benchmark prints them.
_FOREIGN_DIGIT = re.compile(r"(?![0-9])\d")


#: A time stamp that a log collector put before a line: ``kubectl logs --timestamps``
#: and CI logs ("2024-05-01T10:00:00.123456789Z "), moreutils' ``ts`` ("May 01
#: 10:00:00 ", or "[2024-05-01 10:00:00] " with a format), a logger's "2024-05-01
#: 10:00:00,123 " or "2024/05/01 10:00:00 ".  No benchmark prints a date at the start
#: of a line of its own.
_TIMESTAMP_PREFIX = re.compile(
    r"^[ \t]*\[?(?:\d{4}([-/])\d\d\1\d\d[T ]|[A-Z][a-z]{2} [ \d]\d )\d\d:\d\d:\d\d"
    r"(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?(?:[ \t]+|$)", re.MULTILINE)
#: pdsh and clush put "<host>: " before every line of a host's output; a word and a
#: colon before every line alike is that, never a benchmark's own text.
_HOST_PREFIX = re.compile(r"[A-Za-z][\w.-]{0,62}: ")
#: One level of a quote: "> " (or ">") before a line.
_QUOTE = re.compile(r"^[ \t]{0,3}>[ \t]?", re.MULTILINE)


def without_launcher_prefixes(text: str) -> str:
    """``text`` with the launchers' prefixes (:data:`_LAUNCHER_PREFIX`) and the log
    collectors' time stamps removed from every line: what each process printed, as it
    printed it."""
    text = _TIMESTAMP_PREFIX.sub("", text)
    text = _unquoted(text)
    text = _without_common_host(text)
    return _TAG_INSIDE_LINE.sub("", _LAUNCHER_PREFIX.sub("", text))


def _unquoted(text: str) -> str:
    """``text`` without the "> " that starts every one of its non-blank lines: a reply
    quoting the output (an e-mail, a Markdown block quote), as often as it is nested."""
    while True:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 3 or not all(line.lstrip(" \t").startswith(">") for line in lines):
            return text
        text = _QUOTE.sub("", text)


def _without_common_host(text: str) -> str:
    """``text`` without the "<host>: " that starts every one of its non-blank lines
    (pdsh, clush on one host); ``text`` as it is where the lines do not all share it."""
    lines = [line for line in text.splitlines() if line.strip()]
    first = next((m for m in map(_HOST_PREFIX.match, lines) if m), None) \
        if len(lines) > 2 else None
    if first is None or not all(line.startswith(first.group(0)[:-1]) for line in lines):
        return text
    prefix = first.group(0)
    # a blank line of the host's output is "<host>:" once its trailing blank is gone
    return "".join(line[len(prefix):] if line.startswith(prefix)
                   else line[len(prefix) - 1:] if line.startswith(prefix[:-1]) else line
                   for line in text.splitlines(keepends=True))


def output_lines(text: str) -> list[str]:
    """The non-blank lines of ``text`` as the benchmark printed them: launcher prefixes
    (srun --label, mpirun --tag-output / --timestamp-output) and surrounding blanks
    removed, CRLF read as LF.  Raises Unjudged for a digit that is not ASCII."""
    text = without_launcher_prefixes(_BLANK_LINES.sub("\n", text))
    if not text.isascii():
        foreign = _FOREIGN_DIGIT.search(text)
        if foreign:
            start = text.rfind("\n", 0, foreign.start()) + 1
            end = text.find("\n", foreign.start())
            line = text[start:end if end >= 0 else len(text)].strip()
            raise Unjudged(f"the line {line[:120]!r} has the non-ASCII digit "
                           f"{foreign.group(0)!r}: benchmarks print ASCII digits")
    return [line for line in (raw.strip() for raw in text.splitlines()) if line]



def with_markdown_hashes(lines: list[str], own: re.Pattern,
                         needed: tuple[re.Pattern, ...]) -> list[str]:
    """``lines`` with the "# " put back that Markdown took from a benchmark's own lines:
    pasted outside a code block on a page or an issue, each "# title" line is a heading
    and reads "title".  ``own`` matches those lines as they read without it; they get it
    back only where none of them kept it and a line matches each of ``needed`` (the
    benchmark's title and its table, say), so that other text is never taken for one."""
    if any(line.startswith("#") and own.match(line.lstrip("#").lstrip()) for line in lines):
        return lines
    if not all(any(map(pattern.match, lines)) for pattern in needed):
        return lines
    return [f"# {line}" if own.match(line) else line for line in lines]


def first_crash(text: str, markers: tuple[re.Pattern, ...]) -> re.Match | None:
    """The first of ``markers`` in ``text`` (what went wrong first), or None."""
    found = [m for m in (marker.search(text) for marker in markers) if m]
    return min(found, key=lambda m: m.start()) if found else None


def no_crash(text: str, markers: tuple[re.Pattern, ...]) -> None:
    first = first_crash(text, markers)
    if first:
        raise SanityError(f"benchmark crashed: {first.group(0).strip()[:80]!r} in output")


def first_line(lines: list[str]) -> str:
    return repr(lines[0][:120]) if lines else "an empty output"


#: A number as the benchmarks print it (printf %d, %f, %g, %e).  float() alone would
#: also take "1_000", " inf" spelled many ways, and non-ASCII digits.
_NUMERIC = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def number(token: str, key: int | str) -> float:
    label = f"size {key}" if isinstance(key, int) else key
    if not _NUMERIC.fullmatch(token):
        if token.lower().lstrip("+-") in ("nan", "inf", "infinity", "-nan"):
            raise SanityError(f"value {token!r} for {label} is not finite")
        raise SanityError(f"value {token!r} for {label} is not a number")
    value = float(token)
    if not math.isfinite(value):   # 1e999
        raise SanityError(f"value {token!r} for {label} is not finite")
    if value < 0:
        raise SanityError(f"value {token!r} for {label} is negative")
    return value


#: A line that is only an author's mark of lines left out of a paste: "...", "…",
#: "[...]", "<snip>", "[...snip...]" (the UCX FAQ's osu_bw under UCX_LOG_LEVEL=info).
_ELISION = re.compile(r"^\s*(?:\.{3,}|…+|\[\s*(?:\.{3}|…)?\s*(?:snip)?\s*(?:\.{3}|…)?\s*\]"
                      r"|<\s*snip\s*>\S*)\s*$", re.IGNORECASE)


def elision_line(lines: list[str]) -> str | None:
    """The first line of ``lines`` that only marks lines left out of a paste, or None."""
    return next((line.strip() for line in lines if _ELISION.match(line)), None)


def size_table(check: str, rows: list[list[str]], column: int, sizes: list[int],
               elided: str | None = None) -> Values:
    """size -> the value in ``column`` of each row; every size in ``sizes`` exactly once.
    ``elided``: the line with which the paste marks rows left out (``elision_line``):
    a missing size is then the author's cut, not the run's, and could not be judged."""
    values: Values = {}
    for row in rows:
        size = int(row[0])
        if size not in sizes:
            raise SanityError(f"{check}: unexpected message size {size} "
                              f"(the size range gives {sizes[0]}..{sizes[-1]})")
        if size in values:
            raise SanityError(f"{check}: message size {size} appears twice")
        values[size] = number(row[column], size)
    for size in sizes:
        if size not in values and elided:
            raise Unjudged(f"{check}: no line for message size {size}: the paste leaves "
                           f"lines out ({elided!r})")
        if size not in values:
            raise SanityError(f"{check}: no line for message size {size}")
    return values


def method_differs(check: str, fields: list[str]) -> str | None:
    """The sentence that a run's method fields (``fields``: one clause each, quoting
    the line it printed) differ from the figures' command, or None when none do."""
    if not fields:
        return None
    command = " ".join(benchmarks.CHECKS[check].command)
    return (f"{check} was run another way than the figures' command ({command}): "
            f"{'; '.join(fields)}")


#: mpirun's echo of a UCX_NET_DEVICES it was given (-x UCX_NET_DEVICES=...): Open MPI
#: prints "[host:pid] SET UCX_NET_DEVICES=mlx5_6:1,mlx5_7:1" before the program's output.
_UCX_NET_DEVICES = re.compile(r"\bSET UCX_NET_DEVICES=(\S+)")


def rdma_ports_method(check: str, lines: list[str]) -> str | None:
    """The method sentence of an MPI run that named several RDMA ports to UCX: its
    messages were striped over them, and a figure measured over one port (the seeds'
    commands name one) is another measurement, above whose port limit the run may go.
    None where no line names more than one."""
    for line in lines:
        found = _UCX_NET_DEVICES.search(line)
        ports = [p for p in found.group(1).split(",") if p] if found else []
        if len(ports) > 1:
            return method_differs(check, [
                f"UCX spread the messages over {len(ports)} RDMA ports "
                f"({found.group(0)!r}); the figures are measured over one"])
    return None


def expect_count(check: str, what: str, expected: int, seen: int) -> None:
    if seen != expected:
        raise SanityError(f"{check}: expected {expected} {what}, saw {seen}")



ROW = re.compile(r"^\d+\s+\S+")
#: The words of a column that is not a number: OMB's --validation (Pass / Fail).
_WORD_COLUMNS = ("Pass", "Fail")


def table_rows(lines: list[str]) -> list[list[str]]:
    """The rows of the table that starts with ``lines``: the lines that fit its columns,
    split.  Its first row (a size, then its values) gives the columns: as many, with
    --validation's Pass/Fail column where it has one.  A line of numbers that does not
    fit (a job script's sysctl echo "4096 16384 4194304" after the table) is no row,
    however it begins; other noise (warnings, prompts) never starts with a size."""
    candidates = [line.split() for line in lines if ROW.match(line)]
    if not candidates:
        return []

    def shape(cells: list[str]) -> tuple[bool, ...]:
        return tuple(cell in _WORD_COLUMNS for cell in cells)

    columns = shape(candidates[0])
    return [cells for cells in candidates if shape(cells) == columns]
