"""Units in one place. Internally everything is SI: bytes, seconds, FLOP, FLOP/s, bytes/s.

Conversions happen at the boundary (catalog loading and display); displays say GB or GiB explicitly.
"""

from __future__ import annotations

import math
import re

from .errors import BadValue
from .i18n import say

KiB = 2**10
MiB = 2**20
GiB = 2**30
GB = 10**9
TB = 10**12
TFLOPS = 1e12
GBIT = 1e9 / 8  # bytes per second in one Gbit/s

HOUR = 3600.0
DAY = 86400.0

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def gib(n_bytes: float) -> float:
    """Bytes -> GiB (for display and JSON)."""
    return n_bytes / GiB


# Counts, durations and money as people type them (issue 33): '200 million', '5000万', '1,000,000', '2 days',
# '48小时', '1d12h', '3000元', '$500'. Every parser raises BadValue (a SpecError: one line, exit code 2).
_SUFFIX = {"": 1, "k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9, "g": 1e9,
           "billion": 1e9, "t": 1e12, "tn": 1e12, "trillion": 1e12, "thousands": 1e3, "millions": 1e6,
           "billions": 1e9, "trillions": 1e12,
           # Chinese counts by 10^4: 万 (ten thousand) and 亿 (10^8), with 十/百/千 before them
           "百": 1e2, "千": 1e3, "万": 1e4, "萬": 1e4, "十万": 1e5, "百万": 1e6, "千万": 1e7, "亿": 1e8, "億": 1e8,
           "十亿": 1e9, "百亿": 1e10, "千亿": 1e11, "万亿": 1e12}
# a number (1,000,000 with thousands separators, 1.5, .5, 1e9) and a suffix word (k, million, 万, 亿)
_COUNT_RE = re.compile(r"^\s*(-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]*)(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)\s*"
                       r"([^\W\d_]*)\s*$", re.IGNORECASE)
COUNT_EXAMPLES = "200M, 1.5B, 50k, 1e9, 1,000,000, 200 million, 2亿, 5000万"
_LONGEST = 100  # characters: a longer text is no value a person typed (and regular expressions stay linear)


def parse_count(text: str | float | int) -> float:
    """'200M' -> 2e8, '1.5 billion' -> 1.5e9, '50k' -> 5e4, '1,000,000' -> 1e6, '2亿' -> 2e8, '5000万' -> 5e7,
    1e9 -> 1e9. Raises BadValue on anything else."""
    value = None
    try:
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            value = float(text)
        elif isinstance(text, str) and len(text) <= _LONGEST:
            m = _COUNT_RE.match(text)
            scale = _SUFFIX.get(m.group(2).lower()) if m else None
            if scale is not None and any(c.isdigit() for c in m.group(1)):
                value = float(m.group(1).replace(",", "")) * scale
    except (OverflowError, ValueError):  # an integer of hundreds of digits (YAML reads it as int)
        value = None
    if value is None or not math.isfinite(value):
        raise BadValue(say("ec_not_a_count", text=text, examples=COUNT_EXAMPLES))
    return value


MINUTE, WEEK = 60.0, 7 * DAY
_DURATION_UNIT = {None: HOUR, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "秒": 1.0,
                  "m": MINUTE, "min": MINUTE, "mins": MINUTE, "minute": MINUTE, "minutes": MINUTE, "分": MINUTE,
                  "分钟": MINUTE, "分鐘": MINUTE,
                  "h": HOUR, "hr": HOUR, "hrs": HOUR, "hour": HOUR, "hours": HOUR, "小时": HOUR, "小時": HOUR,
                  "时": HOUR, "钟头": HOUR,
                  "d": DAY, "day": DAY, "days": DAY, "天": DAY, "日": DAY,
                  "w": WEEK, "wk": WEEK, "wks": WEEK, "week": WEEK, "weeks": WEEK, "周": WEEK, "週": WEEK,
                  "星期": WEEK, "礼拜": WEEK}
# one part: a number and its unit ('1.5周', '48 hours', '90分钟', '2个月' is not taken: months have no fixed length)
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)\s*个?\s*([^\W\d_]*)\s*,?\s*")
DURATION_EXAMPLES = "48h, 2d, 2 days, 90 minutes, 1d12h, 48小时, 2天, 1.5周"


def parse_duration(text: str | float | int) -> float:
    """'48h' -> 172800 s, '2 days', '90 minutes', '2天', '48小时', '1.5周', '1d12h' (parts added up); a bare number is
    hours. Raises BadValue on anything else."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text > 1e300 or not math.isfinite(text) or text < 0:  # (an int past float's range compares too)
            raise BadValue(say("ec_not_a_duration", text=text, examples=DURATION_EXAMPLES))
        return float(text) * HOUR
    s = str(text).strip() if len(str(text)) <= _LONGEST else ""
    total, pos, parts = 0.0, 0, []
    while s and pos < len(s):
        m = _DURATION_PART.match(s, pos)
        unit = (m.group(2).lower() or None) if m else None
        if not m or unit not in _DURATION_UNIT or (unit is None and (parts or m.end() < len(s))):
            parts = []  # a bare number is hours only on its own: '1d12' is no duration
            break
        parts.append(m.group(0))
        total += float(m.group(1)) * _DURATION_UNIT[unit]
        pos = m.end()
    if not parts or not math.isfinite(total):
        raise BadValue(say("ec_not_a_duration", text=text, examples=DURATION_EXAMPLES))
    return total


# Money: an amount (a count: 3000, 3,000, 3千, 1万) with its currency before or after it, or none.
_CURRENCY = {"cny": "CNY", "rmb": "CNY", "yuan": "CNY", "元": "CNY", "块": "CNY", "人民币": "CNY", "¥": "CNY",
             "￥": "CNY", "cn¥": "CNY", "usd": "USD", "$": "USD", "us$": "USD", "dollar": "USD", "dollars": "USD",
             "美元": "USD", "美金": "USD"}
_MONEY_RE = re.compile(r"^\s*(?P<pre>us\$|cn¥|[$¥￥]|cny|rmb|usd)?\s*(?P<amount>.*?)\s*"
                       r"(?P<post>元|块|人民币|美元|美金|cny|rmb|usd|yuan|dollars?)?\s*$", re.IGNORECASE)
MONEY_EXAMPLES = "3000, 3,000, 3000元, ¥3000, 3000 CNY, $500, 500 USD, 3千元, 1万元"


def currency_code(text: str) -> str:
    """'rmb', '元', '¥' -> 'CNY'; '$', 'usd' -> 'USD'; anything else upper-cased (checked by the caller)."""
    word = str(text).strip()
    return _CURRENCY.get(word.lower(), word.upper())


def parse_money(text: str | float | int) -> tuple[float, str | None]:
    """'3000元' -> (3000, 'CNY'), '$500' -> (500, 'USD'), '1万元' -> (10000, 'CNY'), '3,000' -> (3000, None).
    Raises BadValue on anything else (an amount that names two different currencies too)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return parse_count(text), None
    m = _MONEY_RE.match(text) if isinstance(text, str) and len(text) <= _LONGEST else None
    named = {_CURRENCY[x.lower()] for x in (m.group("pre"), m.group("post")) if x} if m else set()
    if m is None or len(named) > 1 or not m.group("amount"):
        raise BadValue(say("ei_not_money", text=text, examples=MONEY_EXAMPLES))
    try:
        amount = parse_count(m.group("amount"))
    except BadValue:
        raise BadValue(say("ei_not_money", text=text, examples=MONEY_EXAMPLES)) from None
    return amount, (named.pop() if named else None)


# Sequence lengths as model cards write them: '4k context' is 4096 tokens, so k and M are powers of two here
# ('2k' 2048, '32k' 32768, '128k' 131072, '1M' 1048576); a plain number is itself ('2048', '2,048').
_LENGTH_RE = re.compile(r"^\s*((?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]*)(?:\.[0-9]+)?)\s*([km]?)\s*$", re.IGNORECASE)
_LENGTH_SUFFIX = {"": 1, "k": KiB, "m": MiB}


def parse_seq_len(text: str) -> float:
    """'4k' -> 4096, '128K' -> 131072, '2048' -> 2048, '2,048' -> 2048 (the caller checks that it is a whole number
    in range). Raises BadValue on anything else."""
    m = _LENGTH_RE.match(text) if isinstance(text, str) and len(text) <= _LONGEST else None
    if m is None or not any(c.isdigit() for c in m.group(1)):
        raise BadValue(f"not a sequence length: {text!r} (examples: 2048, 4k = 4096, 32k = 32768, 128k = 131072)")
    return float(m.group(1).replace(",", "")) * _LENGTH_SUFFIX[m.group(2).lower()]
