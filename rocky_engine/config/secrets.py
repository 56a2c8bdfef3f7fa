"""Which values of a loaded config are secrets, for the one redactor (rocky_engine/redact.py).

A value is a secret when it is:

- a ``SecretStr`` anywhere in the config (adapter ``password``, ``dsn``, ``api_key``, ``api_secret``,
  webhook ``secret``), named by its key path; a DSN's password is one too (a message may quote only it);
- a name listed in a connector's ``secrets``, with its value from the environment;
- a hook's ``env`` value, a webhook's ``url`` (Slack and Teams URLs embed their token) and header values;
- the value of a ``${VAR}`` whose name, or the key it is assigned to, looks like a secret (``TOKEN``,
  ``PASSWORD``, ``SECRET``, ``KEY``, ``DSN``, ``AUTH``, ``CREDENTIAL``, ``PRIVATE``): a bearer token
  substituted into a hook command is named ``${PAGER_TOKEN}`` in ``rocky hooks list``, never shown.

The same set makes ``config_hash``: the hash of the config text with each secret replaced by its name,
so a guessed secret cannot be confirmed offline against a run record.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, SecretStr

from rocky_engine.redact import Redactor

_SECRET_WORD = re.compile(r"(?i)(token|passw|secret|key|dsn|auth|credential|private|bearer|pwd)")
_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
_ASSIGNED_KEY = re.compile(r"^\s*(?P<key>[A-Za-z0-9_.\"'-]+)\s*=")
_LIBPQ_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S+))")


def config_secrets(config: Any, raw_text: str, env: Mapping[str, str]) -> Redactor:
    """The redactor of every secret in ``config`` (a ``RockyConfig``) and its ``${VAR}`` references."""
    found = Redactor()
    _secret_refs(found, raw_text, env)
    for name, adapter in config.adapters.items():
        _secret_fields(found, adapter, f"adapter.{name}")
    for connector in config.connectors.values():
        for var in connector.secrets:
            if var in env:
                found.add(var, env[var])
    for hooks in config.hook.commands.values():
        for hook in hooks:
            for key, value in hook.env.items():
                found.add(key, value)
    for event, webhook in config.hook.webhooks.items():
        prefix = f"hook.webhooks.on_{event}"
        found.add(f"{prefix}.url", webhook.url)
        for key, value in webhook.headers.items():
            found.add(f"{prefix}.headers.{key}", value)
        _secret_fields(found, webhook, prefix)
    return found


def _secret_refs(found: Redactor, raw_text: str, env: Mapping[str, str]) -> None:
    for line in raw_text.splitlines():
        if "${" not in line or line.lstrip().startswith("#"):
            continue
        assigned = _ASSIGNED_KEY.match(line)
        key_is_secret = assigned is not None and _SECRET_WORD.search(assigned.group("key")) is not None
        for match in _REFERENCE.finditer(line):
            name = match.group("name")
            value = env.get(name)
            if value and (key_is_secret or _SECRET_WORD.search(name)):
                found.add(name, value)


def _secret_fields(found: Redactor, model: BaseModel, prefix: str) -> None:
    for field_name in type(model).model_fields:
        value = getattr(model, field_name, None)
        if not isinstance(value, SecretStr):
            continue
        secret = value.get_secret_value()
        found.add(f"{prefix}.{field_name}", secret)
        if field_name == "dsn":
            password = dsn_password(secret)
            if password:
                found.add(f"{prefix}.password", password)


def dsn_password(dsn: str) -> str | None:
    """The password inside a libpq DSN (URI or ``key=value`` form), or None."""
    if "://" in dsn:
        try:
            password = urlsplit(dsn).password
        except ValueError:
            return None
        return unquote(password) if password else None
    match = _LIBPQ_PASSWORD.search(dsn)
    if match is None:
        return None
    quoted, bare = match.group(1), match.group(2)
    return re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
