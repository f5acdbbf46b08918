"""Print the sha256 of a package version's archive and URL patches, and where a Spack
source mirror keeps them.

Run as ``spack python source_files.py PKG VERSION`` (scripts/bundle.sh): the digest
tells whether a git archive is upstream's file (then into the bundle's ``mirror/``);
a source that is not upstream's bytes (a recompressed release tarball, a git tag with
its configure script generated) goes into its ``unchecked/`` mirror.  Spack finds a
mirror's files by the digest the recipe declares, not by their content
(``spack/mirrors/layout.py``), so the files must lie exactly there:

    archive <sha256> <path in the mirror>
    patch <sha256> <url> <path in the mirror>

The patches are every URL patch of the recipe whose condition the version can meet
(``when=`` variants left open): the unchecked install fetches them from the mirror too.
"""

import sys

import spack.fetch_strategy as fs
import spack.mirrors.layout as layout
import spack.patch
import spack.repo
import spack.spec

if len(sys.argv) != 3:
    raise SystemExit("usage: spack python source_files.py PKG VERSION")
name, version = sys.argv[1:3]
spec = spack.spec.Spec(f"{name}@={version}")
cls = spack.repo.PATH.get_pkg_class(name)
if spec.version not in cls.versions:
    sys.exit(3)  # not a version of the recipe (scripts/bundle.sh tries vX.Y too)
fetcher = fs.for_package_version(cls(spec), spec.version)
where = layout.default_mirror_layout(fetcher, f"{name}/{name}-{version}", spec).path
print("archive", fetcher.digest, where)
for when, patches in cls.patches.items():
    if not spec.intersects(when):
        continue
    for patch in patches:
        if isinstance(patch, spack.patch.UrlPatch):
            where = layout.default_mirror_layout(patch.fetcher(), f"{name}/{name}-patch").path
            print("patch", patch.sha256, patch.url, where)
