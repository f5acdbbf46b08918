"""The OSU Micro-Benchmarks (OMB): point-to-point and collective latency and bandwidth
tables, "# OSU <API><ACCEL> <name>" then "# Size" and one row a message size."""

from __future__ import annotations

import re
from typing import Any

from ocibench import accelerators, benchmarks
from ocibench.figures.outputs.common import (
    UNITS,
    Measurement,
    NotThisOutput,
    SanityError,
    Unjudged,
    elision_line,
    expect_count,
    failure_words,
    first_line,
    rdma_ports_method,
    size_table,
    table_rows,
    with_markdown_hashes,
)

#: Its programs' failure words: OMB's xccl benchmarks, NCCL_CHECK
#: (c/xccl/util/osu_util_xccl_interface.h: "Failed: NCCL Error <file>: <line> '<why>'",
#: RCCL's the same).
FAILED = failure_words(r"^Failed: [A-Z]+ Error ")

#: OMB's title line: "# OSU <API><ACCEL> <name> v7.5".  The registry gives it without
#: <ACCEL> ("# OSU MPI Latency Test", benchmarks.CheckSpec.title).  <ACCEL> is what -d
#: asked for: each vendor's ``omb_title_tag`` ("-CUDA" with -d cuda, "-ROCM" with -d
#: rocm), nothing without -d (c/util/osu_util_mpi.c, print_preamble /
#: print_version_message: printf(benchmark_header, "-CUDA") / "-ROCM" / "").  <API> of
#: the xccl benchmarks is the collective library they were built with, whichever
#: vendor's (c/xccl/util/osu_util_xccl_interface.h OMB_XCCL_TYPE_STR, "NCCL" or "RCCL",
#: OMB 7.4): the registry's title names one, any vendor's is read.
_OMB_TITLE = re.compile(r"^# OSU (\w+) (.+)$")


def _omb_api_name(check: str) -> tuple[str | None, str]:
    """(API, name) of a check's OMB title: ("MPI", "Latency Test"); API None for an
    xccl benchmark (any vendor's collective library)."""
    spec = benchmarks.CHECKS[check]
    found = _OMB_TITLE.match(spec.title)
    if not found:   # the registry's entry is wrong: a defect of ours, said as one
        raise ValueError(f"{check}: the registry's title is not '# OSU <API> <name>'")
    return (None if spec.collective else found.group(1)), found.group(2)

#: OMB 7.4 and older print the buffers of a -d run under the title (7.5 does not):
#: "# Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)".
_OMB_BUFFERS = re.compile(r"^# Send Buffer on .*\((\w+)\) and Receive Buffer on .*\((\w+)\)")
#: OMB's own cap on the message size (its -M, --mem-limit; c/util/osu_util_mpi.c
#: check_mem_limit, c/xccl/collective/osu_xccl_*.c).  The first is printed without a
#: newline, so it may run into the next line.
_OMB_CAPS = (re.compile(r"Limiting max message size to: (\d+)"),
             re.compile(r"Continuing with max message size of (\d+) bytes"))


def _omb_apis(check: str) -> list[str]:
    api = _omb_api_name(check)[0]
    return [api] if api else [vendor.collective for vendor in accelerators.VENDORS.values()]


def _omb_title(check: str, lines: list[str]) -> str:
    """OMB's title line of the one run in ``lines``, whatever its accelerator."""
    apis, name = _omb_apis(check), _omb_api_name(check)[1]
    title = re.compile(rf"# OSU (?:{'|'.join(apis)})(?:-[A-Z]+(?: MANAGED)?)? "
                       rf"{re.escape(name)}\b")
    found = [line for line in lines if title.match(line)]
    if not found:
        other = next((line for line in lines if line.startswith("# OSU ")), None)
        raise NotThisOutput(f"not {check} output: no '# OSU {' or '.join(apis)} {name}' title "
                       f"({'its title is ' + repr(other) if other else 'first line '}"
                       f"{'' if other else first_line(lines)})")
    if len(found) > 1:
        raise Unjudged(f"{check}: {len(found)} runs in one output; give one run")
    return found[0]


def omb_vendor(title: str) -> accelerators.Accelerator | None:
    """The vendor whose device buffers OMB's ``title`` names (its ``omb_title_tag``), or
    None for a run without -d."""
    head = title.split(" ")[2] if title.count(" ") >= 2 else ""
    return next((vendor for vendor in accelerators.VENDORS.values()
                 if head.endswith(vendor.omb_title_tag)), None)


def _omb_buffers(check: str, title: str, lines: list[str], params: dict[str, Any]) -> str:
    """The title (and OMB 7.4's buffer line) must show the buffers the run claims: a
    vendor's tag (-CUDA, -ROCM) for D-D, H-D, D-H and the xccl benchmarks; none for host
    buffers.  A host-buffer output judged as a D-D figure would otherwise pass as a
    device measurement.  Returns the title's API (MPI, or the collective library)."""
    api = title.split(" ")[2].split("-")[0]
    expected_api, name = _omb_api_name(check)
    xccl = expected_api is None
    buffers = params.get("buffers", "D-D" if xccl else "H-H")
    vendor = omb_vendor(title)
    tags = " or ".join(v.omb_title_tag.lstrip("-") for v in accelerators.VENDORS.values())
    shown = next((m for m in map(_OMB_BUFFERS.match, lines) if m), None)
    if shown and "-".join(shown.groups()) != buffers:
        flag = vendor.buffer_flag if vendor else \
            "|".join(v.buffer_flag for v in accelerators.VENDORS.values())
        raise SanityError(f"{check}: the output says {shown.string!r}; "
                          f"buffers={buffers} is -d {flag} {buffers.replace('-', ' ')}")
    if buffers == "H-H" and vendor and shown is None and "buffers" not in params:
        # A host collective (osu_allreduce, osu_alltoall) has no buffers to claim: its
        # -d run is sane and measured another way, never a failure of the node.
        raise Unjudged(f"{check}: the title {title!r} is a -d {vendor.buffer_flag} run "
                       f"(device buffers); the figures are host buffers: OMB without -d "
                       f"('# OSU {api} {name}')")
    if buffers == "H-H" and vendor and shown is None:
        raise SanityError(f"{check}: the title {title!r} is a -d {vendor.buffer_flag} run; "
                          f"host buffers (H-H) are OMB without -d: '# OSU {api} {name}'")
    if buffers != "H-H" and not vendor:
        what = f"buffers={buffers}" if "buffers" in params else f"{api} on GPUs"
        needs = " or ".join(
            f"'# OSU {v.collective if xccl else api}{v.omb_title_tag} {name}' (OMB run "
            f"with -d {v.buffer_flag} {buffers.replace('-', ' ')})"
            for v in accelerators.VENDORS.values())
        raise SanityError(f"{check}: the title {title!r} is not a {tags} run; {what} "
                          f"needs {needs}")
    if xccl and vendor and api != vendor.collective:
        raise SanityError(f"{check}: the title {title!r} names {api} with "
                          f"{vendor.omb_title_tag} buffers: OMB's {vendor.collective} build "
                          f"prints '# OSU {vendor.collective}{vendor.omb_title_tag} {name}'")
    return api


def _omb_cap(check: str, text_lines: list[str], rows: list[list[str]],
             sizes: list[int], params: dict[str, Any]) -> None:
    """Name OMB's own size cap when it is why sizes are missing."""
    seen = {int(row[0]) for row in rows}
    missing = [size for size in sizes if size not in seen]
    for line in text_lines:
        for cap in _OMB_CAPS:
            found = cap.search(line)
            if found and missing and missing[0] > int(found.group(1)):
                largest = sizes[-1]
                # alltoall's buffers hold a message per rank (check_mem_limit)
                ranks = params.get("nodes", 1) * params.get("ranks_per_node", 1)
                needed = largest * ranks if benchmarks.CHECKS[check].message_per_rank \
                    else largest
                raise SanityError(
                    f"{check}: no line for message size {missing[0]}: OMB capped the "
                    f"messages at {found.group(1)} bytes ({found.group(0)!r}); "
                    f"run it with -M {needed} (--mem-limit) or more")


#: OMB's own '#' lines as they read where Markdown took the '#' (a paste outside a code
#: block): its title, buffers, datatype, pairs and the table's header.
_OMB_HASHLESS = re.compile(r"^(?:OSU \w+(?:-\w+)*(?: MANAGED)? .*\bTest\b|Size\s|Send Buffer on "
                           r"|Datatype:|\[ pairs:)")
_OMB_HASHLESS_NEEDED = (re.compile(r"^OSU \S+ .*\bTest\b"), re.compile(r"^Size\s"))


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    lines = with_markdown_hashes(lines, _OMB_HASHLESS, _OMB_HASHLESS_NEEDED)
    title = _omb_title(check, lines)
    api = _omb_buffers(check, title, lines, params)
    body = lines[lines.index(title) + 1:]
    # A pasted session may run another benchmark after this one (EESSI's posts print
    # osu_bibw, then osu_latency): this run's table ends at the next OMB title.
    body = body[:next((i for i, line in enumerate(body) if line.startswith("# OSU ")),
                      len(body))]
    header = next((i for i, line in enumerate(body) if line.startswith("# Size")), None)
    if header is None:
        raise SanityError(f"output truncated: missing the '# Size' header of {check}")
    if benchmarks.CHECKS[check].collective:
        # OMB's xccl benchmarks print "#Using NCCL" (RCCL) once per rank, before the
        # title (c/xccl/util/osu_util_xccl_interface.c omb_xccl_interface_inject).
        ranks = sum(1 for line in lines if line == f"#Using {api}")
        expect_count(check, "ranks", params["nodes"] * params["gpus_per_node"], ranks)
    rows = table_rows(body[header + 1:])
    # --validation (-c) adds a column of "Pass" or "Fail" (c/util/osu_util_mpi.h
    # VALIDATION_STATUS): a "Fail" is data the MPI delivered wrong, a broken run.
    failed = next((row for row in rows if "Fail" in row[1:]), None)
    if failed:
        raise SanityError(f"{check}: OMB's validation failed at message size {failed[0]} "
                          f"({' '.join(failed)!r})")
    sizes = benchmarks.expected_sizes(check, params)
    _omb_cap(check, lines, rows, sizes, params)
    values = size_table(check, rows, 1, sizes, elided=elision_line(body[header + 1:]))
    metric = benchmarks.CHECKS[check].metric
    found = omb_vendor(title)
    return Measurement(check, metric, UNITS[metric], values,
                       method=rdma_ports_method(check, _own_preamble(lines, title)),
                       vendor=found.vendor if found else None)



def _own_preamble(lines: list[str], title: str) -> list[str]:
    """The lines between the run before (its OMB title) and this run's title: where
    mpirun echoed what it was given for this run (a session may paste several)."""
    at = lines.index(title)
    start = max((i + 1 for i, line in enumerate(lines[:at]) if line.startswith("# OSU ")),
                default=0)
    return lines[start:at]
