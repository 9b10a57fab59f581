"""SKILL.md front matter read with PyYAML's safe constructor, made strict.

PyYAML's safe loader builds plain data only, but silently keeps the last of two equal keys
and follows aliases. This loader refuses duplicate keys at every depth (keys are compared
once constructed, so `1` and `0x1` clash), aliases and merge keys (so a "billion laughs"
document cannot be expanded by whoever reads the result later) and nesting deeper than a
fixed limit; the front matter itself is capped in size before it is parsed.

Events come from libyaml when PyYAML was built with it (about seven times faster than the
pure-Python parser on large front matter), but nodes are always composed in Python: the
C composer recurses without a limit and crashes the process on deeply nested input.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from domain.errors import Invalid, field_error
from domain.skills import (
    INVALID_SKILL_MD,
    SkillManifest,
    manifest_from_front_matter,
    split_front_matter,
)
from domain.text import check_storable

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_DEPTH = 32
_MERGE_TAG = "tag:yaml.org,2002:merge"
TOO_DEEP = "values are nested too deeply"
_LIBYAML_TOO_DEEP = "maximum nesting depth"


class _PythonEvents(Reader, Scanner, Parser):  # type: ignore[misc]  # PyYAML has no stubs here
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


_Events: Any = _PythonEvents
try:
    from yaml._yaml import CParser

    _Events = CParser
except ImportError:  # PyYAML built without libyaml
    pass


class _StrictSafeLoader(Composer, _Events, SafeConstructor, Resolver):  # type: ignore[misc]
    """A safe loader without aliases, merge keys or duplicate keys, its depth capped."""

    def __init__(self, stream: str) -> None:
        _Events.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ComposerError(None, None, "aliases are not allowed", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()
                raise ComposerError(None, None, TOO_DEEP, event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                raise ConstructorError(
                    None, None, "merge keys ('<<') are not allowed", key_node.start_mark
                )
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the base constructor refuses it as an unhashable key
            if key in seen:
                shown = repr(key) if len(repr(key)) <= 60 else repr(key)[:57] + "..."
                raise ConstructorError(None, None, f"duplicate key {shown}", key_node.start_mark)
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping


def _yaml_error(error: yaml.YAMLError) -> Invalid:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        # libyaml's scanner (in PyYAML 6.0.4's wheels) may meet the depth limit first, as it
        # reads flow collections ahead of the composer: one reason, whichever refuses.
        problem = TOO_DEEP if _LIBYAML_TOO_DEEP in error.problem else error.problem
        # The front matter starts on SKILL.md's second line; marks count from 0.
        where = f" (line {error.problem_mark.line + 2})" if error.problem_mark else ""
        reason = f"front matter is not valid YAML: {problem}{where}"
    elif isinstance(error, yaml.reader.ReaderError):
        reason = "front matter holds a character YAML does not allow"
    else:
        reason = "front matter is not valid YAML"
    return Invalid(INVALID_SKILL_MD, [field_error("skillMd", reason)])


class YamlFrontMatterParser:
    """`FrontMatterParser` over PyYAML, in safe mode with the refusals described above."""

    def __init__(self, *, max_front_matter_bytes: int = MAX_FRONT_MATTER_BYTES) -> None:
        self._max_bytes = max_front_matter_bytes

    def parse(self, skill_md: str) -> SkillManifest:
        """The checked manifest of `skill_md` (see the port's contract)."""
        check_storable(skill_md, "skillMd")
        yaml_text, _ = split_front_matter(skill_md)
        if len(yaml_text.encode("utf-8")) > self._max_bytes:
            raise Invalid(
                INVALID_SKILL_MD,
                [field_error("skillMd", f"front matter is larger than {self._max_bytes} bytes")],
            )
        loader = None
        try:
            loader = _StrictSafeLoader(yaml_text)
            data = loader.get_single_data()
        except yaml.YAMLError as error:
            raise _yaml_error(error) from None
        except RecursionError:
            raise Invalid(
                INVALID_SKILL_MD, [field_error("skillMd", "front matter is nested too deeply")]
            ) from None
        finally:
            if loader is not None:
                loader.dispose()
        return manifest_from_front_matter(data)
