"""Errors about the files the user hands us (trainfit.userfiles: bounded reading; keyed errors), en / zh.
Registered in the one message table by `trainfit.i18n`."""

from __future__ import annotations

USERFILE_MESSAGES: dict[str, dict[str, str]] = {
    "uf_unreadable": {"en": "cannot read {what} {path}: {why}", "zh": "无法读取{what} {path}：{why}"},
    "uf_too_large": {"en": "cannot read {what} {path}: it is {size}, more than the {cap} a {what} may be "
                           "(refused without reading it)",
                     "zh": "无法读取{what} {path}：文件大小 {size}，超过{what}的上限 {cap}（未读取）"},
    "uf_line_too_long": {"en": "cannot read {what} {path}: line {line} is longer than {cap}",
                         "zh": "无法读取{what} {path}：第 {line} 行超过 {cap}"},
    "uf_not_utf8": {"en": "cannot read {what} {path}: not UTF-8 text (byte 0x{byte} at byte offset {offset})",
                    "zh": "无法读取{what} {path}：不是 UTF-8 文本（字节偏移 {offset} 处的字节 0x{byte}）"},
    "uf_nul": {"en": "cannot read {what} {path}: a NUL byte at byte offset {offset} (not a text file)",
               "zh": "无法读取{what} {path}：字节偏移 {offset} 处有 NUL 字节（不是文本文件）"},
    "uf_yaml_alias": {"en": "{where}: YAML anchors and aliases (&name / *name, line {line}) are not accepted; "
                            "write the values out",
                      "zh": "{where}：不接受 YAML 锚点和别名（&name / *name，第 {line} 行）；请直接写出取值"},
    "uf_duplicate_key": {"en": "{where}: duplicate key {name} (line {line}); each key may appear once",
                         "zh": "{where}：重复的键 {name}（第 {line} 行）；每个键只能出现一次"},
    "uf_json_duplicate_key": {"en": "{where}: duplicate key {name}; each key may appear once",
                              "zh": "{where}：重复的键 {name}；每个键只能出现一次"},
    "uf_too_deep": {"en": "{where}: nested more than {limit} levels deep", "zh": "{where}：嵌套超过 {limit} 层"},
    "uf_yaml_syntax": {"en": "cannot read {where}: not valid YAML ({detail})",
                       "zh": "无法读取 {where}：不是有效的 YAML（{detail}）"},
}
