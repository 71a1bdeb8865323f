"""User text is data: a model name, a path or a region a user wrote is shown as it is, never obeyed as markup or code.
The writers use these, one per kind of output: plain text (comments in scripts), Markdown and shell words."""

from __future__ import annotations

import re
import shlex

# C0/C1 controls (newlines and tabs included: one line of text stays one line) and the bidirectional overrides and
# isolates, which can make a comment read otherwise than it runs (CVE-2021-42574, "Trojan Source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def plain(text: object) -> str:
    """One line with no control or bidi character: each becomes a space (runs of them one space)."""
    return re.sub(r" {2,}", " ", _UNSAFE.sub(" ", str(text))).strip()


def markdown(text: object) -> str:
    """Plain, with Markdown's and HTML's special characters escaped (shown literally, never rendered)."""
    return _MD_SPECIAL.sub(r"\\\1", plain(text)).replace("&", "&amp;")


def shell_join(words: list[str]) -> str:
    """A command line a shell reads back as exactly these words."""
    return shlex.join(str(w) for w in words)
