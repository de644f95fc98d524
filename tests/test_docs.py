"""The docs list every attribute key and every public name."""

from __future__ import annotations

from pathlib import Path

import agentscope
from agentscope import attributes

DOCS = Path(__file__).resolve().parent.parent / "docs"


def attribute_keys() -> set[str]:
    return {
        value
        for name, value in vars(attributes).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str) and "." in value
    }


def test_every_attribute_key_is_documented():
    text = (DOCS / "attributes.md").read_text()
    missing = sorted(key for key in attribute_keys() if f"`{key}`" not in text)
    assert not missing, f"docs/attributes.md lacks {missing}"


def test_every_public_name_is_documented():
    text = (DOCS / "api.md").read_text()
    missing = [name for name in agentscope.__all__ if name != "__version__" and name not in text]
    assert not missing, f"docs/api.md lacks {missing}"


def test_every_kind_rule_is_in_conventions_md():
    from agentscope.classify import VALUE_RULES

    text = (DOCS / "conventions.md").read_text()
    missing = [
        f"{key}={value}"
        for key, table in VALUE_RULES[1:]  # the first, agentscope.kind, is one row for all its kinds
        for value, kind in table.items()
        if f"| `{key}` = `{value}` | {kind}" not in text
    ]
    assert not missing, f"docs/conventions.md lacks the kind rules {missing}"


def test_every_peer_timing_shape_is_in_conventions_md():
    from agentscope.classify import FIRST_TOKEN_EVENTS, PEER_FIELD_KEYS

    text = (DOCS / "conventions.md").read_text()
    missing = sorted(name for name in (*FIRST_TOKEN_EVENTS, *PEER_FIELD_KEYS) if f"`{name}`" not in text)
    assert not missing, f"docs/conventions.md lacks {missing}"


def test_every_content_key_is_documented():
    text = (DOCS / "attributes.md").read_text()
    listed = [*attributes.CONTENT_KEYS, *(f"{prefix}…" for prefix in attributes.CONTENT_PREFIXES)]
    missing = sorted(key for key in listed if f"`{key}`" not in text)
    assert not missing, f"docs/attributes.md lacks {missing}"


def test_every_typed_column_is_in_store_md():
    from agentscope.store.schema import ATTRIBUTE_FIELDS, TYPED_COLUMNS

    text = (DOCS / "store.md").read_text()
    missing = [
        name for name, key, sql_type in ATTRIBUTE_FIELDS if f"| `{name}` | {sql_type} | `{key}`" not in text
    ]
    missing += [name for name, _ in TYPED_COLUMNS if f"| `{name}` |" not in text]
    assert not missing, f"docs/store.md lacks the typed columns {missing}"
