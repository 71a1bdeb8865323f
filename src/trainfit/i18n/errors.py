"""Chinese for the one-line input errors the web calculator shows (the CLI's own errors, raised in English by the
spec, catalog and units layers): each known shape is matched whole and rewritten with the values it carries; an
error no pattern knows keeps its English detail behind a Chinese lead-in, so every error the page shows in zh
starts in Chinese. tests/test_ui.py and tests/test_ui_browser.py check the error paths."""

from __future__ import annotations

import re

_KINDS = {"model": "模型", "GPU": "GPU", "instance type": "实例类型", "region": "地域", "efficiency": "效率参数"}
_HINTS = {"choose a preset or paste a config.json": "请选择预设或粘贴 config.json",
          "`trainfit gpus` lists the catalog": "`trainfit gpus` 列出目录",
          "`trainfit instances` lists the catalog": "`trainfit instances` 列出目录",
          "`trainfit instances` lists regions with prices": "`trainfit instances` 列出有价格的地域",
          "use a preset (`trainfit models`), a config.json path or a model directory":
              "请使用预设（`trainfit models`）、config.json 路径或模型目录"}
_V = r"(?P<v>.*)"
# (pattern matched against the whole message, Chinese template filled with the pattern's named groups)
_ZH: list[tuple[str, str]] = [
    (r"unknown (?P<kind>[\w .-]+?) '(?P<w>[^']*)'(?: \(did you mean: (?P<dym>[^?]*)\?\))?(?:; (?P<hint>.+))?",
     "未知的{kind} '{w}'{dym}{hint}"),
    (r"(?P<f>[\w-]+): '(?P<v>.*)' is not a whole number", "{f}：'{v}' 不是整数"),
    (r"(?P<f>[\w -]+) must be an integer in \[(?P<lo>[^,]+), (?P<hi>[^\]]+)\], got " + _V,
     "{f} 必须是 [{lo}, {hi}] 内的整数，实际为 {v}"),
    (r"invalid (?P<f>[\w-]+) '(?P<v>[^']*)' \(choose from: (?P<c>.+)\)", "无效的 {f} '{v}'（可选：{c}）"),
    (r"model: choose a preset or paste a config.json", "模型：请选择预设或粘贴 config.json"),
    (r"config.json: not valid JSON \((?P<d>.+)\)", "config.json：不是有效的 JSON（{d}）"),
    (r"malformed model config for (?P<w>.+?): (?P<d>.+)", "模型配置格式错误（{w}）：{d}"),
    (r"(?P<f>--[\w-]+): not a count: '(?P<v>.*)' \(examples: (?P<e>.+)\)", "{f}：'{v}' 不是数量（例如 {e}）"),
    (r"(?P<f>--[\w-]+): not a duration: '(?P<v>.*)' \(examples: (?P<e>.+)\)", "{f}：'{v}' 不是时长（例如 {e}）"),
    (r"(?P<f>--?[\w-]+) must be positive, got " + _V, "{f} 必须为正数，实际为 {v}"),
    (r"(?P<f>--?[\w-]+) must be at least (?P<lo>\S+), got " + _V, "{f} 至少为 {lo}，实际为 {v}"),
    (r"(?P<f>--[\w-]+): could not convert string to float: '(?P<v>.*)'", "{f}：'{v}' 不是数字"),
    (r"lang must be one of (?P<c>.+), got '(?P<v>.*)'", "lang 必须是 {c} 之一，实际为 '{v}'"),
    (r"zero stage must be 0, 1, 2 or 3, got " + _V, "ZeRO 阶段必须是 0、1、2 或 3，实际为 {v}"),
    (r"request too large \((?P<n>[\d,]+) bytes; a config.json is a few KB\)",
     "请求过大（{n} 字节；config.json 通常只有几 KB）"),
    (r"form: expected a JSON object", "表单：应为 JSON 对象"),
    (r"form: (?P<d>.+)", "表单：{d}"),
    (r"internal error, please report it: (?P<d>.+)", "内部错误，请报告：{d}"),
    (r"no configuration meets the request \((?P<c>.+)\)", "没有满足请求的配置（约束：{c}）"),
]
_COMPILED = [(re.compile(p), z) for p, z in _ZH]
FALLBACK_ZH = "输入有误："


def localize_error(text: str, lang: str) -> str:
    """`text` (one line, English) in `lang`; in zh an unknown shape becomes '输入有误：' + the English detail."""
    if lang != "zh":
        return text
    for pattern, template in _COMPILED:
        m = pattern.fullmatch(text)
        if m:
            v = {k: (x or "") for k, x in m.groupdict().items()}
            if "kind" in v:
                v["kind"] = _KINDS.get(v["kind"], v["kind"])
                v["dym"] = f"（是否想输入：{v['dym']}？）" if v["dym"] else ""
                v["hint"] = "；" + _HINTS.get(v["hint"], v["hint"]) if v["hint"] else ""
            return template.format(**v)
    return FALLBACK_ZH + text
