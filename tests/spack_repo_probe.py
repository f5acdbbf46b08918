"""Run inside Spack (`spack -e <env> python tests/spack_repo_probe.py <command> ...`) by
tests/test_spack_repo.py; prints one JSON document on stdout.

  directives               per package of the ocibench repo: its directives and own
                           methods that the builtin recipe does not have, and those of
                           the builtin that it drops
  concretize TREE SPEC...  concretizes the specs together (one solve) and reports
                           variants, direct dependencies, patches and the build
                           arguments our recipes derive from them; for
                           osu-micro-benchmarks also the PATH entries its run
                           environment adds when its prefix is the directory TREE,
                           and for its MPI the files our install callbacks write
  variants PACKAGE...      the names of each package's variants, of the recipe
                           Spack uses (ours where we override the builtin)
  refuse SPEC...           concretizes each spec alone and reports, per spec, whether
                           Spack refused it and the message it gave, as `spack spec`
                           prints it (one process: Spack starts and loads its
                           repositories once, not once per spec)
"""

import inspect
import json
import sys
import tempfile
from pathlib import Path

import spack.builder
import spack.concretize
import spack.repo
import spack.spec
from spack.util.environment import EnvironmentModifications

OURS = "ocibench"


def _when(when):
    return str(when) or "always"


def _values(variant):
    if variant.values is not None:
        return ",".join(str(v) for v in variant.values)
    check = variant.single_value_validator
    return f"<{check.__module__}.{check.__qualname__}>"


def directive_entries(cls):
    """Every directive of a package class as a comparable line of text."""
    entries = set()
    for when, by_name in cls.variants.items():
        for name, v in by_name.items():
            entries.add(f"variant {name} default={v.default} values={_values(v)} "
                        f"multi={v.multi} when={_when(when)}")
    for when, by_name in cls.dependencies.items():
        for dep in by_name.values():
            entries.add(f"depends_on {dep.spec} type={dep.depflag} when={_when(when)}")
    for when, conflicts in cls.conflicts.items():
        for spec, msg in conflicts:
            entries.add(f"conflicts {spec} when={_when(when)} msg={msg}")
    for when, requirements in cls.requirements.items():
        for specs, policy, msg in requirements:
            entries.add(f"requires {' | '.join(map(str, specs))} policy={policy} "
                        f"when={_when(when)} msg={msg}")
    for when, patches in cls.patches.items():
        for patch in patches:
            name = getattr(patch, "path", None) or getattr(patch, "url", "")
            entries.add(f"patch {name.rsplit('/', 1)[-1]} sha256={patch.sha256} "
                        f"when={_when(when)}")
    for version, kwargs in cls.versions.items():
        entries.add(f"version {version} {sorted(kwargs.items())}")
    return entries


def own_methods(cls, base):
    """Functions and properties defined in the class body that the base lacks or
    defines with different source."""
    names = []
    for name, value in vars(cls).items():
        if name.startswith("__") or not (inspect.isfunction(value) or isinstance(value, property)):
            continue
        if name in vars(base) and _source(vars(base)[name]) == _source(value):
            continue
        names.append(name)
    return sorted(names)


def _source(obj):
    func = obj.fget if isinstance(obj, property) else obj
    return inspect.getsource(func)


def builders_lost(cls, base):
    """The builder classes of the builtin recipe's module (``CMakeBuilder``, ...) that
    our subclass's module lacks (neither the class nor a subclass of it under that
    name): Spack looks a package's builder up by name in the package's own module only
    (spack.builder.get_builder_class), so without them the override builds with
    Spack's default builder, none of the builtin's build logic."""
    theirs, mine = sys.modules[base.__module__], sys.modules[cls.__module__]
    lost = []
    for name, value in sorted(vars(theirs).items()):
        if not (inspect.isclass(value) and issubclass(value, spack.builder.Builder)
                and value.__module__ == theirs.__name__):
            continue
        found = getattr(mine, name, None)
        if not (inspect.isclass(found) and issubclass(found, value)):
            lost.append(name)
    return lost


def directives():
    ours, builtin = spack.repo.PATH.get_repo(OURS), spack.repo.PATH.get_repo("builtin")
    report = {}
    for name in sorted(ours.all_package_names()):
        cls = ours.get_pkg_class(name)
        if not builtin.exists(name):
            # A recipe of our own (no builtin to override): nothing to compare with.
            report[name] = {"builtin": False, "namespace": cls.namespace}
            continue
        base = builtin.get_pkg_class(name)
        mine, theirs = directive_entries(cls), directive_entries(base)
        report[name] = {
            "builtin": True,
            "subclass_of_builtin": issubclass(cls, base),
            "namespace": cls.namespace,
            "added": sorted(mine - theirs),
            "dropped": sorted(theirs - mine),
            "methods": own_methods(cls, base),
            "builders_lost": builders_lost(cls, base),
        }
    # the values each of our recipes' amdgpu_target takes (ROCmPackage's, widened)
    report["_amdgpu_targets"] = {
        name: sorted({value for by_name in ours.get_pkg_class(name).variants.values()
                      for vname, v in by_name.items() if vname == "amdgpu_target"
                      for value in (v.values if v.values is not None else ())})
        for name in sorted(ours.all_package_names())}
    return report


def concretize(tree, *texts):
    pairs = spack.concretize.concretize_together([(spack.spec.Spec(t), None) for t in texts])
    report = {}
    for abstract, spec in pairs:
        pkg = spec.package
        entry = {
            "abstract": str(abstract),
            "namespace": spec.namespace,
            "version": str(spec.version),
            "variants": {k: ",".join(map(str, v.value)) if isinstance(v.value, tuple)
                         else str(v.value) for k, v in spec.variants.items()},
            "dependencies": sorted(d.name for d in spec.dependencies()),
            "compiler": spec["c"].name if "c" in spec else None,
            "patches": sorted(p.path.rsplit("/", 1)[-1] for p in spec.patches),
        }
        if spec.name == "stream":
            entry["cflags"] = pkg.stream_cflags()
        if spec.name == "osu-micro-benchmarks":
            entry["nccl_configure_args"] = pkg.nccl_configure_args()
            entry["run_path"] = run_path(spec, tree)
            entry["build_directory"] = pkg.build_directory
            entry["source_path"] = pkg.stage.source_path
            entry["hash7"] = spec.dag_hash(7)
            report["openmpi"] = {"installed_files": our_install_callbacks(spec["openmpi"])}
        if spec.name == "nccl-tests":
            # what Spack does before a build: the MPI names its wrappers (spec.mpicxx)
            spec["mpi"].package.setup_dependent_package(pkg.module, spec)
            entry["build_targets"] = pkg.build_targets
            entry["source_path"] = pkg.stage.source_path
            entry["hash7"] = spec.dag_hash(7)
        report[spec.name] = entry
    return report


def run_path(spec, prefix):
    """PATH entries of the run environment, first one first, for an install at prefix."""
    installed = spec.prefix
    spec.set_prefix(prefix)
    try:
        env = EnvironmentModifications()
        spec.package.setup_run_environment(env)
    finally:
        spec.set_prefix(installed)
    return [m.value for m in reversed(list(env)) if m.name == "PATH"]


def our_install_callbacks(spec):
    """Run the after-install callbacks of our recipe that Spack would run for spec
    (selected by their `when`, as Spack's builder does) in an empty prefix; returns
    the files they wrote, by relative path."""
    installed = spec.prefix
    prefix = Path(tempfile.mkdtemp(prefix="ocibench-probe-"))
    spec.set_prefix(str(prefix))
    try:
        builder = spack.builder.create(spec.package)
        for callback in spack.builder.InstallationPhase("install", builder).run_after:
            if callback.__module__.startswith(f"spack_repo.{OURS}."):
                callback(builder)
    finally:
        spec.set_prefix(installed)
    return {str(f.relative_to(prefix)): f.read_text() for f in prefix.rglob("*") if f.is_file()}


def refuse(*texts):
    report = {}
    for text in texts:
        try:
            spack.concretize.concretize_one(spack.spec.Spec(text))
        except Exception as error:  # what `spack spec` would print, and stop on
            long = getattr(error, "long_message", None) or ""
            report[text] = {"refused": True, "message": f"{error}\n{long}"}
        else:
            report[text] = {"refused": False, "message": ""}
    return report


def sources():
    """Per root of the active (concretized) environment: what `spack install` of it
    would build (not installed here or upstream, not an external) and which of those
    has no source offline: neither a develop source (dev_path) nor its archive in a
    source mirror of the configuration, where Spack looks for it by the recipe's
    digest (spack.mirrors.layout)."""
    import spack.environment
    import spack.fetch_strategy as fs
    import spack.mirrors.layout as layout
    import spack.mirrors.mirror
    import spack.util.url

    env = spack.environment.active_environment()
    mirrors = [Path(spack.util.url.local_file_path(m.fetch_url))
               for m in spack.mirrors.mirror.MirrorCollection(source=True).values()
               if m.fetch_url.startswith("file://")]
    report = {}
    for root in env.concrete_roots():
        build, missing = [], []
        for spec in root.traverse(order="post"):
            if spec.external or spec.installed:
                continue
            name = spec.format("{name}@{version}")
            build.append(name)
            if "dev_path" in spec.variants or not spec.package.has_code:
                continue
            try:
                fetcher = fs.for_package_version(spec.package)
                where = layout.default_mirror_layout(
                    fetcher, f"{spec.name}/{spec.name}-{spec.version}", spec).path
            except Exception as error:  # a recipe Spack cannot fetch at all offline
                missing.append(f"{name} ({error})")
                continue
            if not any((mirror / where).is_file() for mirror in mirrors):
                missing.append(name)
        report[root.name] = {"hash": root.dag_hash(), "build": build, "missing": missing}
    return report


def variants(*names):
    """Per package, the names of its variants under any condition, of the recipe Spack
    uses in this environment (the ocibench repository's where it has one)."""
    return {name: sorted({v for by_name in spack.repo.PATH.get_pkg_class(name).variants.values()
                          for v in by_name})
            for name in names}


COMMANDS = {"directives": directives, "concretize": concretize, "refuse": refuse,
            "sources": sources, "variants": variants}

if __name__ == "__main__":
    command, *args = sys.argv[1:]
    print(json.dumps(COMMANDS[command](*args), indent=1, sort_keys=True))
