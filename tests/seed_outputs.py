"""The benchmark outputs the seed documents show, and which run each one is.

The seed documents are the OCI HPC tutorials that site/shapes/*.yaml cite as figure
sources.  Their output blocks are transcribed once into tests/data/seed_outputs/: one
file per block (the "$ " command line and everything printed under it, up to the next
prompt or the end of its code block, byte for byte: real noise such as
report-bindings, SET UCX_NET_DEVICES, blank lines and indentation included), indexed
in index.yaml with the seed document, section, check, shape and parameters of the run.
The tests read only these files, so a clone anywhere runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).resolve().parent / "data" / "seed_outputs"


@dataclass(frozen=True)
class SeedOutput:
    file: str
    doc: str
    section: str
    #: The last non-blank line above the command line (STREAM's NPS setting is there).
    lead: str
    check: str
    shape: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        params = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.doc[:3]}:{self.check}:{params}"


def _load_index() -> tuple[dict[str, str], tuple[SeedOutput, ...]]:
    data = yaml.safe_load((DATA_DIR / "index.yaml").read_text(encoding="utf-8"))
    return data["documents"], tuple(SeedOutput(**entry) for entry in data["outputs"])


#: Each seed document -> the shape(s) column of the seeds' README table, verbatim.
#: INDEX: every benchmark output block of the seed documents.
DOCUMENTS, INDEX = _load_index()


def extract(entry: SeedOutput) -> str:
    """The command line of ``entry`` and the output under it, as a terminal shows it."""
    return (DATA_DIR / entry.file).read_text(encoding="utf-8")
