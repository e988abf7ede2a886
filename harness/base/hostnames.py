"""Host and user names that come from an inventory, checked before they reach a command line.

An address from an inventory is data, never an option (`-oProxyCommand=...`) or shell text.
Used by harness.infra.target (the Redis nodes) and harness.infra.process (load-generator hosts).
"""

from __future__ import annotations

import ipaddress
import re

from harness.base.errors import BadInput

# A host name (or an ssh_config alias): dot-separated labels of letters, digits, '_' and
# '-', none starting with '-'; at most 253 characters. Nothing else reaches a command line.
HOST_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*\.?")
USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
HOST_RULE = "a host name (letters, digits, '.', '_', '-', not starting with '-') or an IP address"


def check_host(value, where: str) -> str:
    """`value` when it is an IP address or a host name, else BadInput: an address from an
    inventory is data, never an option (`-oProxyCommand=...`) or shell text."""
    text = value if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    if text is not None and len(text) <= 253:
        try:
            ipaddress.ip_address(text)
            return text
        except ValueError:
            pass
        if HOST_RE.fullmatch(text):
            return text
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise BadInput(f"{where}: {shown} is not {HOST_RULE}; fix the inventory")


def check_user(value, where: str) -> str:
    """A login name: letters, digits, '_', '.', '-', not starting with '-' or '.'."""
    if isinstance(value, str) and USER_RE.fullmatch(value):
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise BadInput(
        f"{where}: {shown} is not a user name (letters, digits, '_', '.', '-', not starting "
        f"with '-'); fix the inventory"
    )
