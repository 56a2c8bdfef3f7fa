"""Which values of a loaded config are secrets, for the one redactor (rocky_engine/redact.py).

A value is a secret when it is:

- a ``SecretStr`` of an adapter or a webhook (adapter ``password``, ``dsn``, ``api_key``, ``api_secret``,
  webhook ``secret``), or an adapter string key named like a secret (a plugin's ``token``), named by its
  key path; a DSN's password is one too (a message may quote only it), as is the password in a
  ``[state]`` URL;
- a name listed in a connector's ``secrets``, with its value from the environment;
- a hook's ``env`` value, a webhook's ``url`` (Slack and Teams URLs embed their token) and header values;
- the value of a ``${VAR}`` whose name, or the key it is assigned to, looks like a secret (``TOKEN``,
  ``PASSW``, ``SECRET``, ``DSN``, ``AUTH``, ``CREDENTIAL``, ``PRIVATE``, ``BEARER``, ``PWD``, ``API_KEY``,
  ``ACCESS_KEY``, or a variable ending in ``_KEY``): a bearer token
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

#: A key or variable name that holds a secret. Not a bare "key": ``unique_key = "${ID_COLUMN}"`` names a
#: column, and redacting column names would garble every document.
_SECRET_WORD = re.compile(
    r"(?i)(token|passw|secret|dsn|auth|credential|private|bearer|pwd|api_?key|access_?key)"
)
#: A variable ending in ``_KEY`` (``STRIPE_KEY``) is a secret too.
_SECRET_VAR = re.compile(r"(?:^|_)KEY$")
_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
_ASSIGNED_KEY = re.compile(r"^\s*(?P<key>[A-Za-z0-9_.\"'-]+)\s*=")
_LIBPQ_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S+))")


def config_secrets(config: Any, raw_text: str, env: Mapping[str, str]) -> Redactor:
    """The redactor of every secret in ``config`` (a ``RockyConfig``) and its ``${VAR}`` references."""
    found = Redactor()
    _secret_refs(found, raw_text, env)
    for name, adapter in config.adapters.items():
        _secret_fields(found, adapter, f"adapter.{name}")
    for key in ("valkey_url", "s3_endpoint_url"):  # a URL may carry a password (redis://:pw@host)
        url = getattr(config.state, key, None)
        password = dsn_password(url) if isinstance(url, str) and "://" in url else None
        if password:
            found.add(f"state.{key}.password", password)
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
            if value and (key_is_secret or _SECRET_WORD.search(name) or _SECRET_VAR.search(name)):
                found.add(name, value)


def _secret_fields(found: Redactor, model: BaseModel, prefix: str) -> None:
    """SecretStr fields, and string fields (declared or extra, as a plugin adapter's) named like one."""
    values = {name: getattr(model, name, None) for name in type(model).model_fields}
    values.update(model.model_extra or {})
    for field_name, value in values.items():
        if isinstance(value, SecretStr):
            secret = value.get_secret_value()
        elif isinstance(value, str) and _SECRET_WORD.search(field_name):
            secret = value
        else:
            continue
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
