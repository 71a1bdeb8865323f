"""The serving commands' work, for the CLI and for Python callers: names in, (JSON document, rich view) out."""

from __future__ import annotations

from ..catalog import resolve_model
from ..errors import ServingError
from .estimate import serve
from .search import Target, alternatives, compare, search
from .spec import ServingSpec, choice

PROVIDERS = ("alibaba", "aws", "gcp", "azure")


def estimate_doc(model: str, gpu, instance, gpus, spec: dict, overrides, lang: str):
    from ..report.serving import estimate_dict, render_estimate

    est = serve(model, gpu=gpu, instance=instance, gpus=gpus, overrides=overrides, **spec)
    alts = alternatives(est, overrides) if not est.fits else []
    return estimate_dict(est, alts, lang), render_estimate(est, alts, lang)


def compare_doc(model: str, gpus_csv: str, spec: dict, gpus, overrides, provider: str, lang: str):
    from ..i18n import t
    from ..report.serving import option_dict, render_options

    provider = choice("provider", provider, PROVIDERS)
    m = resolve_model(model)
    names = [g.strip() for g in gpus_csv.split(",") if g.strip()]
    rows = compare(m, names, ServingSpec(tp=gpus or 1, **spec), overrides, (provider,))
    doc = {"model": m.name, "provider": provider, "rows": [option_dict(o, lang) for o in rows]}
    return doc, render_options(t("sv_compare", lang).format(model=m.name), rows, lang)


def search_doc(model: str, spec: dict, tokens_per_s, ttft_ms, tpot_ms, formats_csv, provider: str, top: int,
               overrides, lang: str):
    from ..i18n import t
    from ..report.serving import option_dict, render_options

    provider = choice("provider", provider, PROVIDERS)
    for flag, value in (("target-tokens-per-s", tokens_per_s), ("max-ttft-ms", ttft_ms), ("max-tpot-ms", tpot_ms)):
        if value is not None and value <= 0:
            raise ServingError("sv_e_positive", flag=flag, value=value)
    m = resolve_model(model)
    base = ServingSpec(**spec)
    formats = tuple(choice("formats", f, ("bf16", "fp16", "fp8", "int8", "awq", "gptq"))
                    for f in (formats_csv or base.weights).split(",") if f.strip())
    target = Target(tokens_per_s, ttft_ms, tpot_ms)
    options, tried = search(m, base, target, overrides, (provider,), formats)
    doc = {"model": m.name, "provider": provider, "target": vars(target), "setups_tried": tried,
           "options": [option_dict(o, lang) for o in options[:top]]}
    if not options:
        from rich.text import Text

        return doc, Text(t("sv_none_meets", lang).format(n=tried), style="bold red")
    return doc, render_options(t("sv_ranked", lang), options[:top], lang,
                               f"{t('searched', lang)}: {tried}")
