"""The one-line errors of bad input in the asked language.

An error is raised with a sentence of the message table (`SpecError(say(key, ...))`: i18n/errors_inputs.py,
errors_commands.py, the sentence modules) or with a message key (errors.LocalizedError: generate's, serving's, the
user files'); either renders from the table, not by translating its English. An error raised with plain text (an
upstream library's message, say) keeps its English detail behind a Chinese lead-in (FALLBACK_ZH). The CLI and the
web calculator both use it; tests/test_i18n.py runs many bad inputs under --lang zh and fails when one falls back.
"""

from __future__ import annotations

FALLBACK_ZH = "输入有误："


def localize_error(message: str, lang: str) -> str:
    """A bad-input message in `lang`: a sentence of the table from the table; plain text as it is in English, behind
    FALLBACK_ZH in Chinese."""
    from . import Msg

    if isinstance(message, Msg):
        return message.render(lang)
    return FALLBACK_ZH + message if lang == "zh" else message


# The Chinese of the kinds of user file (trainfit.userfiles' `what`), by their English name.
USERFILE_WHAT_ZH = {"request file": "请求文件", "calibration file": "校准文件", "config.json": " config.json",
                    "plan.json": " plan.json", "JSONL file of cases": "案例 JSONL 文件",
                    "monitor record": "监控记录文件", "FSDP config": " FSDP 配置文件",
                    "request-length file": "请求长度文件"}
