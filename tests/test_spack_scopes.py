"""Each shape's Spack scope, decided from its facts: the vendor rows' variants per recipe
(a vendor's variants only on the recipes that have them), and every documented shape's
scope byte for byte as committed in tests/data/spack-scopes/.

The scopes are decided without Spack and without this machine (ocibench.spack.scopes
decide: the facts gather read are replaced by fixed ones).  After an intended change
to a scope, rewrite the committed files with
``PYTHONPATH=src python3 tests/test_spack_scopes.py`` and read their diff.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from intel_row import INTEL, intel_shape
from ocibench import accelerators, paths, shapes
from ocibench.spack import scopes

DATA = Path(__file__).parent / "data" / "spack-scopes"
DOCUMENTED = [n for n in shapes.known_shapes()
              if not scopes.is_machine_described(shapes.load(n))]
#: This checkout and the per-user cache, as the committed files write them.
PLACES = {str(paths.REPO_ROOT): "<checkout>", str(paths.cache_dir()): "<cache>"}


def decided(shape: shapes.Shape) -> str:
    """The shape's scope as `ocibench spack-config` writes it, from fixed facts: no
    mirror, the module tree under /modules, this checkout's paths named."""
    facts = dataclasses.replace(scopes.gather(shape, None), mirrors={},
                                module_root=Path("/modules") / shape.name)
    text = scopes.render(shape.name, scopes.decide(facts))
    for place, name in PLACES.items():
        text = text.replace(place, name)
    return text


@pytest.mark.parametrize("name", DOCUMENTED)
def test_scope_is_the_committed_one(name: str) -> None:
    want = (DATA / f"{name}.yaml").read_text()
    assert decided(shapes.load(name)) == want, (
        f"the scope of {name} changed: if intended, run "
        "`PYTHONPATH=src python3 tests/test_spack_scopes.py` and review the diff")


def test_every_documented_shape_has_its_committed_scope() -> None:
    assert sorted(p.stem for p in DATA.glob("*.yaml")) == sorted(DOCUMENTED)


def test_decide_reads_only_its_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What gather read (module tree, mirrors) is what decide writes, whatever this
    machine's environment says by then."""
    facts = dataclasses.replace(scopes.gather(shapes.load("BM.GPU.H100.8"), None),
                                mirrors={"m": {"url": "file:///m"}},
                                module_root=Path("/elsewhere/modules"))
    monkeypatch.setenv("OCIBENCH_MODULES_ROOT", str(tmp_path))
    scope = scopes.decide(facts)
    assert scope["modules"]["default"]["roots"]["lmod"] == "/elsewhere/modules"
    assert scope["env_vars"]["prepend_path"]["MODULEPATH"] == "/elsewhere/modules/Core"
    assert scope["mirrors"] == {"m": {"url": "file:///m"}}


# --------------------------------------------------------------------------- the rows


def _require(scope: dict) -> dict[str, list[str]]:
    pkgs = scope["packages"]
    return {name: pkgs[name]["require"][0].split() for name in pkgs
            if isinstance((pkgs[name].get("require") or [None])[0], str)}


@pytest.fixture
def intel(monkeypatch: pytest.MonkeyPatch) -> accelerators.Accelerator:
    monkeypatch.setitem(accelerators.VENDORS, INTEL.vendor, INTEL)
    return INTEL


def test_intel_like_row_puts_its_variants_only_where_a_recipe_has_them(intel) -> None:
    """docs/adding-a-vendor.md's Intel-like row: spack-packages' openmpi, ucx, ucc, OMB
    and gdrcopy have no level_zero variant, babelstream has +sycl2020."""
    scope = scopes.derive(intel_shape())
    require = _require(scope)
    said = " ".join(" ".join(r) for r in require.values())
    assert "level_zero" not in said and "sycl_target" not in said, said
    assert require["babelstream"] == ["@5.0", "+sycl2020", "target=sapphirerapids"]
    for name in ("openmpi", "ucx", "ucc", "osu-micro-benchmarks"):
        assert not any(v in ("+cuda", "+nccl") or v.startswith("cuda_arch")
                       for v in require[name]), name
    assert "gdrcopy" not in require   # UCX +gdrcopy is the row's gdr_copy: NVIDIA's here
    notes = scope["_notes"]
    assert any(n.startswith("openmpi: its recipe has no variant for intel GPUs") for n in notes)
    assert any(n.startswith("osu-micro-benchmarks: its recipe has no variant for intel")
               for n in notes)
    assert any(n.startswith("nccl-tests: left out") for n in notes)


@pytest.mark.parametrize("row", [accelerators.NVIDIA, accelerators.AMD, INTEL],
                         ids=lambda r: r.vendor)
def test_a_rows_recipes_get_its_variants_and_no_other(row, monkeypatch) -> None:
    """Each recipe the row lists takes exactly its variants for the shape's target;
    every other recipe none of the vendor's."""
    monkeypatch.setitem(accelerators.VENDORS, INTEL.vendor, INTEL)
    shape = {"nvidia": lambda: shapes.load("BM.GPU.H100.8"),
             "amd": lambda: shapes.load("BM.GPU.MI300X.8"), "intel": intel_shape}[row.vendor]()
    arch = shape.gpus["arch"]
    require = _require(scopes.derive(shape))
    spelled = {row.spack_variant, row.collective_variant}
    for name, said in require.items():
        wanted = row.recipe_variants(name, arch)
        gpu = [v for v in said if v in spelled or v.startswith(f"{row.spack_arch_variant}=")
               or v in (wanted or ())]
        assert gpu == list(wanted or ()), name


def test_recipe_variants_spell_the_target() -> None:
    assert accelerators.AMD.recipe_variants("ucc", "gfx942") == (
        "+rocm", "+rccl", "amdgpu_target=gfx942")
    assert accelerators.NVIDIA.recipe_variants("ucc", "90") == ("+cuda", "+nccl")
    assert accelerators.NVIDIA.recipe_variants("perftest", "90") is None
    assert accelerators.AMD.recipe_variants("rccl-tests", "gfx942") == ()


if __name__ == "__main__":
    DATA.mkdir(parents=True, exist_ok=True)
    for stale in DATA.glob("*.yaml"):
        stale.unlink()
    for name in DOCUMENTED:
        (DATA / f"{name}.yaml").write_text(decided(shapes.load(name)))
    print(f"wrote {len(DOCUMENTED)} scopes under {DATA}", file=sys.stderr)
