"""Source schema names as structured components, and the target routing templates built from them.

``[source.schema_pattern] prefix = "src", separator = "__", components = ["tenant", "regions..."]``
reads ``src__acme__us_west__eu`` as ``{tenant: "acme", regions: ["us_west", "eu"]}``. A trailing ``...``
makes the last component variadic: it takes one or more parts, as a list. A schema that carries the
prefix but has the wrong number of parts is a *misfit*: it is skipped, and the caller must say so (a
warning naming the schema and the expected pattern), never drop it silently. ``prefix`` may be written
with or without its trailing separator (``"src"`` and ``"src__"`` mean the same); an empty prefix makes
every schema a candidate.

Routing: ``catalog_template`` / ``schema_template`` replace ``{component}`` placeholders with component
values; a variadic value joins its parts with the *target* separator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocky_engine.errors import ConfigError

if TYPE_CHECKING:
    from rocky_engine.config.pipelines import SchemaPattern as SchemaPatternConfig

ComponentValue = str | list[str]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
VARIADIC_SUFFIX = "..."


@dataclass(frozen=True, slots=True)
class ComponentSpec:
    """One named part of a schema name; ``variadic`` takes one or more parts (a list)."""

    name: str
    variadic: bool = False


@dataclass(frozen=True, slots=True)
class Misfit:
    """A schema with the pattern's prefix that does not fit it; ``reason`` is the user-facing message."""

    schema: str
    reason: str


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    """A source schema that fits the pattern."""

    schema: str
    components: dict[str, ComponentValue]


@dataclass(frozen=True)
class SchemaPattern:
    """A parsed ``[source.schema_pattern]``."""

    prefix: str
    separator: str
    components: tuple[ComponentSpec, ...]

    @classmethod
    def from_config(cls, cfg: SchemaPatternConfig, *, where: str = "source.schema_pattern") -> SchemaPattern:
        """Build from the config model.

        Raises:
            ConfigError: no components, an empty separator, a variadic component that is not last, or
                a repeated component name.
        """
        return cls.build(cfg.prefix, cfg.separator, cfg.components, where=where)

    @classmethod
    def build(
        cls, prefix: str, separator: str, components: Sequence[str], *, where: str = "source.schema_pattern"
    ) -> SchemaPattern:
        if not separator:
            raise ConfigError("separator must not be empty", key=f"{where}.separator",
                              hint='use the separator of your schema names, e.g. "__"')
        if not components:
            raise ConfigError("components must name at least one component", key=f"{where}.components",
                              hint='e.g. components = ["source"] for schemas like raw__orders')
        specs: list[ComponentSpec] = []
        for i, raw in enumerate(components):
            variadic = raw.endswith(VARIADIC_SUFFIX)
            name = raw.removesuffix(VARIADIC_SUFFIX)
            if variadic and i != len(components) - 1:
                raise ConfigError(
                    f"only the last component can be variadic ('{raw}' is not last)",
                    key=f"{where}.components",
                    hint="move the '...' component to the end of the list",
                )
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ConfigError(f"component name '{raw}' is not an identifier", key=f"{where}.components",
                                  hint="use letters, digits and _ (a trailing ... marks the variadic one)")
            if any(s.name == name for s in specs):
                raise ConfigError(f"component '{name}' is named twice", key=f"{where}.components")
            specs.append(ComponentSpec(name, variadic))
        core = prefix[: -len(separator)] if prefix.endswith(separator) else prefix
        return cls(core, separator, tuple(specs))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.components]

    @property
    def head(self) -> str:
        """What every matching schema starts with (``raw__``), empty for an empty prefix."""
        return f"{self.prefix}{self.separator}" if self.prefix else ""

    def describe(self) -> str:
        """The pattern as people read it: ``raw__<source>`` or ``src__<tenant>__<regions>...``."""
        parts = [f"<{c.name}>" + (VARIADIC_SUFFIX if c.variadic else "") for c in self.components]
        return self.head + self.separator.join(parts)

    def has_prefix(self, schema: str) -> bool:
        return not self.prefix or schema == self.prefix or schema.startswith(self.head)

    def parse(self, schema: str) -> ParsedSchema | Misfit | None:
        """Components of ``schema``; ``None`` when it does not carry the prefix (not a source at all)."""
        if not self.has_prefix(schema):
            return None
        rest = schema[len(self.head):] if schema != self.prefix else ""
        parts = rest.split(self.separator) if rest else []
        fixed = len(self.components) - (1 if self.variadic else 0)
        expected = f"at least {len(self.components)}" if self.variadic else str(len(self.components))
        if len(parts) < len(self.components) or (not self.variadic and len(parts) != len(self.components)):
            return Misfit(
                schema,
                f"schema '{schema}' does not match the pattern {self.describe()} (expected {expected} "
                f"component{'s' if expected != '1' else ''} after '{self.head}', found {len(parts)}); "
                "skipped",
            )
        if any(p == "" for p in parts):
            return Misfit(
                schema,
                f"schema '{schema}' has an empty component for the pattern {self.describe()}; skipped",
            )
        values: dict[str, ComponentValue] = {}
        for spec, part in zip(self.components[:fixed], parts[:fixed], strict=True):
            values[spec.name] = part
        if self.variadic:
            values[self.components[-1].name] = list(parts[fixed:])
        return ParsedSchema(schema, values)

    @property
    def variadic(self) -> bool:
        return bool(self.components) and self.components[-1].variadic


def render_template(
    template: str, components: Mapping[str, ComponentValue], separator: str, *, key: str = "target"
) -> str:
    """Replace ``{component}`` placeholders; a list value joins with ``separator``.

    Raises:
        ConfigError: a placeholder names no component.
    """

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in components:
            raise ConfigError(
                f"{{{name}}} is not a source schema_pattern component; components: "
                f"{', '.join(components) or '(none)'}",
                key=key,
                hint="use one of the component names in the template",
            )
        value = components[name]
        return separator.join(value) if isinstance(value, list) else value

    return _PLACEHOLDER.sub(sub, template)


def key_part(value: ComponentValue) -> str:
    """A component value as one asset-key part (a variadic list joins with ``__``, as dagster_rocky does)."""
    return "__".join(value) if isinstance(value, list) else value


def asset_key(source_type: str, components: Mapping[str, ComponentValue], table: str) -> list[str]:
    """``[source_type, *component values, table]`` (CONTRACT section 3)."""
    return [source_type, *(key_part(v) for v in components.values()), table]


def match_template(
    template: str, pattern: SchemaPattern, separator: str, value: str
) -> dict[str, ComponentValue] | None:
    """The inverse of :func:`render_template`: the components that render ``template`` as ``value``
    (case-insensitively), or None when no values do. A variadic component splits on ``separator``; a
    fixed one never holds it. ``rocky dag`` reads, without a warehouse, which replication source a table
    a model reads comes from."""
    variadic = {c.name for c in pattern.components if c.variadic}
    regex: list[str] = []
    seen: set[str] = set()
    last = 0
    for match in _PLACEHOLDER.finditer(template):
        regex.append(re.escape(template[last:match.start()]))
        name = match.group(1)
        regex.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
        seen.add(name)
        last = match.end()
    regex.append(re.escape(template[last:]))
    found = re.fullmatch("".join(regex), value, re.IGNORECASE)
    if found is None:
        return None
    out: dict[str, ComponentValue] = {}
    for name, part in found.groupdict().items():
        if name in variadic:
            out[name] = part.split(separator)
        elif separator in part:
            return None
        else:
            out[name] = part
    return out
