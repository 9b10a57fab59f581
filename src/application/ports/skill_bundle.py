from __future__ import annotations

from typing import Protocol

from domain.skills import SkillBundle, SkillManifest


class FrontMatterParser(Protocol):
    """Reads the manifest out of a SKILL.md's YAML front matter.

    The YAML is read in safe mode (plain data only, no object construction); a duplicate
    key at any depth, an alias, or front matter past the parser's size limit is refused.
    The mapping is then checked by `domain.skills.manifest_from_front_matter`. Raises
    `Invalid` naming `skillMd` when SKILL.md holds unstorable text (NUL, unpaired surrogate),
    has no front matter, or its YAML does not parse, and naming the offending front matter
    key when a rule of the Agent Skills format is broken."""

    def parse(self, skill_md: str) -> SkillManifest:
        """The checked manifest of `skill_md`; `Invalid` as described above."""
        ...


class SkillBundleReader(Protocol):
    """Reads a skill uploaded as one archive, without writing anything anywhere.

    SKILL.md sits at the archive's root, or in its single top-level folder (then named in
    `SkillBundle.folder` and stripped from every path). Every other file keeps its path
    relative to that place and must follow `domain.skills.check_skill_path`. The reader
    caps the number of entries, each entry's and the total decompressed size (counted
    while decompressing, never taken from headers alone), and refuses symbolic links,
    encrypted or duplicate entries, a SKILL.md that is not UTF-8 and an archive that is not
    one: each as `Invalid` naming `archive`. Synchronous and CPU-bound: callers run it off
    the event loop."""

    def read(self, archive: bytes) -> SkillBundle:
        """The bundle `archive` holds; `Invalid` as described above."""
        ...
