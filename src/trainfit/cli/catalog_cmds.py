"""`trainfit models`, `trainfit gpus`, `trainfit instances`, `trainfit efficiencies`: browse the catalogs."""

from __future__ import annotations

import argparse

from .common import add_output_flags, add_prices_flag, apply_prices, console, lang_of, print_json


def add_parsers(sub) -> None:
    p = sub.add_parser("models", help="model presets (architecture, parameters, source)")
    p.add_argument("name", nargs="?", help="show one preset in full")
    p.add_argument("--families", action="store_true",
                   help="which model types the fast (torch-free) path covers; every other goes through the generic "
                        "reader")
    add_output_flags(p)
    p.set_defaults(run=run_models)
    p = sub.add_parser("gpus", help="GPU catalog: memory, bandwidth, dense TFLOPS, links, sources")
    p.add_argument("name", nargs="?", help="show one GPU in full")
    add_output_flags(p)
    p.set_defaults(run=run_gpus)
    p = sub.add_parser("instances", help="cloud instances with GPUs, links and prices")
    p.add_argument("--provider", default=None, help="alibaba | aws | gcp | azure")
    p.add_argument("--gpu", default=None, help="only instances with this GPU")
    p.add_argument("--all", action="store_true", help="include vGPU slices and instances without a known GPU")
    add_prices_flag(p)
    add_output_flags(p)
    p.set_defaults(run=run_instances)
    p = sub.add_parser("efficiencies", help="the named efficiencies and overheads behind every estimate")
    p.add_argument("--gpu", default=None, help="resolve the values for this GPU")
    add_output_flags(p)
    p.set_defaults(run=run_efficiencies)


def run_models(args: argparse.Namespace) -> int:
    from ..catalog import all_models, get_model
    from ..estimate.params import count_params

    lang = lang_of(args)
    if args.families:
        return _families(args, lang)
    if args.name:
        p = get_model(args.name)
        doc = {"name": p.name, "hf_id": p.hf_id, "aliases": list(p.aliases), "params": p.params,
               "hf_config": p.hf_config, "source": p.source, "source_id": p.source_id,
               "source_date": p.source_date, "note": p.note}
        print_json(doc) if args.json else console().print_json(data=doc)
        return 0
    rows = []
    for p in all_models().values():
        s = p.spec()
        rows.append({"name": p.name, "hf_id": p.hf_id, "model_type": s.model_type,
                     "params": count_params(s, "none" if s.is_encoder else "lm"), "layers": s.layers,
                     "hidden": s.hidden, "heads": s.heads, "kv_heads": s.kv_heads, "vocab": s.vocab,
                     "path": "fast" if p.fast_path else "generic", "experts": s.num_experts,
                     "source": p.source, "source_date": p.source_date})
    if args.json:
        print_json({"models": rows})
        return 0
    from ..report.tables import Col, fit_tables

    cols = [Col("name"), Col("type"), Col("path"), Col("params", "right"), Col("layers", "right"),
            Col("hidden", "right"), Col("heads/kv", "right"), Col("experts", "right"), Col("vocab", "right"),
            Col("source", fold=True)]
    body = [(r["name"], r["model_type"], r["path"], f"{r['params'] / 1e9:.2f}B", str(r["layers"]), str(r["hidden"]),
             f"{r['heads']}/{r['kv_heads']}", str(r["experts"] or "-"), str(r["vocab"]), r["source"]) for r in rows]
    for table in fit_tables("trainfit models", cols, body):
        console().print(table)
    return 0


def _families(args: argparse.Namespace, lang: str) -> int:
    from ..i18n import t
    from ..spec.model import SUPPORTED_MODEL_TYPES

    doc = {"fast_path": list(SUPPORTED_MODEL_TYPES), "generic_reader": t("families_generic", lang)}
    if args.json:
        print_json(doc)
        return 0
    c = console()
    c.print(t("families_fast", lang) + " " + ", ".join(SUPPORTED_MODEL_TYPES))
    c.print(doc["generic_reader"])
    return 0


def _gpu_dict(g) -> dict:
    return {"id": g.id, "name": g.name, "aliases": list(g.aliases), "architecture": g.architecture,
            "compute_capability": g.compute_capability, "memory_gb": g.memory_gb, "memory_type": g.memory_type,
            "memory_bandwidth_gbs": g.memory_bandwidth / 1e9,
            "dense_tflops": {k: round(v / 1e12, 2) for k, v in g.peak_flops.items()},
            "bf16_supported": g.bf16_supported, "fp8_supported": g.fp8_supported, "nvlink_gbs": g.nvlink_gbs,
            "pcie_gen": g.pcie_gen, "tdp_w": g.tdp_w, "form_factor": g.form_factor, "unverified": list(g.unverified),
            "sources": list(g.sources), "source_date": g.source_date, "note": g.note}


def run_gpus(args: argparse.Namespace) -> int:
    from ..catalog import all_gpus, get_gpu

    lang_of(args)
    if args.name:
        doc = _gpu_dict(get_gpu(args.name))
        print_json(doc) if args.json else console().print_json(data=doc)
        return 0
    gpus = [_gpu_dict(g) for g in all_gpus().values()]
    if args.json:
        print_json({"gpus": gpus})
        return 0
    from rich.table import Table

    from ..report.tables import fit

    from ..i18n import t as tr

    table = Table(title=tr("gpus_title", lang_of(args)))
    for col in ("id", "arch", "GB", "GB/s", "bf16", "fp16", "fp8", "NVLink GB/s", "PCIe", "W", "sources"):
        table.add_column(col, no_wrap=col != "sources", overflow="fold")  # the sources may wrap at spaces
    for g in gpus:
        star = lambda col, v: f"{v}*" if col in g["unverified"] else f"{v}"  # noqa: E731
        tf = g["dense_tflops"]
        table.add_row(g["id"], g["architecture"], star("memory_gb", g["memory_gb"]),
                      star("memory_bandwidth_gbs", f"{g['memory_bandwidth_gbs']:g}"),
                      star("bf16_tensor_dense_tflops", tf.get("bf16", "—")),
                      star("fp16_tensor_dense_tflops", tf.get("fp16", "—")),
                      star("fp8_tensor_dense_tflops", tf.get("fp8", "—")),
                      star("nvlink_gbs", g["nvlink_gbs"] if g["nvlink_gbs"] is not None else "?"),
                      f"Gen{g['pcie_gen']}" if g["pcie_gen"] else "?", f"{g['tdp_w'] or '?'}",
                      ", ".join(g["sources"]))
    console().print(fit(table, keys=1))
    return 0


def run_instances(args: argparse.Namespace) -> int:
    from ..catalog import all_instances, get_gpu
    from ..catalog.instances import PROVIDERS, cheapest_price
    from ..catalog.prices import provenance
    from ..errors import SpecError

    lang_of(args)
    apply_prices(args)
    if args.provider and args.provider not in PROVIDERS:
        from ..i18n import say

        raise SpecError(say("ec_provider_one_of_bare", choices=", ".join(PROVIDERS)))
    gpu_id = get_gpu(args.gpu).id if args.gpu else None
    rows = []
    for inst in all_instances().values():
        if args.provider and inst.provider != args.provider or gpu_id and inst.gpu != gpu_id:
            continue
        if not args.all and not inst.trainable:
            continue
        price = cheapest_price(inst)
        rows.append({"provider": inst.provider, "instance_type": inst.instance_type, "family": inst.family,
                     "gpu": inst.gpu, "gpu_inferred": inst.gpu_inferred, "gpu_count": inst.gpu_count,
                     "vcpu": inst.vcpu, "ram_gib": inst.ram_gib, "network_gbps": inst.network_gbps,
                     "interconnect": inst.interconnect, "rdma": inst.rdma, "kind": inst.kind,
                     "price_per_hour": price.per_hour if price else None,
                     "currency": price.currency if price else None, "region": price.region if price else None,
                     "price_date": price.price_date if price else None,
                     "price_stale": provenance(price)["price_stale"] if price else None,
                     "price_unverified": price.unverified if price else None,
                     "unverified": list(inst.unverified), "sources": list(inst.sources), "note": inst.note})
    if args.json:
        print_json({"instances": rows})
        return 0
    from ..report.tables import Col, fit_tables

    cols = [Col("instance"), Col("provider"), Col("GPU"), Col("n", "right"), Col("vCPU", "right"),
            Col("RAM GiB", "right"), Col("net Gb/s", "right"), Col("link"), Col("RDMA"), Col("price/h", "right"),
            Col("date")]
    body = []
    for r in rows:
        price = f"{r['price_per_hour']:.2f} {r['currency']}" if r["price_per_hour"] else "—"
        if r["price_unverified"]:
            price += "*"
        body.append((r["instance_type"], r["provider"], f"{r['gpu'] or '?'}{'*' if r['gpu_inferred'] else ''}",
                     str(r["gpu_count"] or "?"), str(r["vcpu"] or "?"), f"{r['ram_gib'] or '?'}",
                     f"{r['network_gbps'] or '?'}", r["interconnect"], r["rdma"], price,
                     (r["price_date"] or "") + ("†" if r["price_stale"] else "")))
    from ..i18n import t as tr

    title = tr("instances_title", lang_of(args))
    for table in fit_tables(title, cols, body):
        console().print(table)
    return 0


def run_efficiencies(args: argparse.Namespace) -> int:
    from ..catalog import get_gpu
    from ..catalog.efficiency import Efficiencies

    from ..calibrate import at_bound
    from ..catalog.efficiency import shipped_calibration

    from ..catalog.efficiency import PRECEDENCE
    from ..i18n import say
    from ..i18n import t as tr

    lang = lang_of(args)
    eff = Efficiencies.default()
    bounds = at_bound((shipped_calibration() or {}).get("values") or {})
    doc: dict = {}
    view = eff.for_gpu(get_gpu(args.gpu)) if args.gpu else None
    for name in eff.names():
        entry = dict(eff.describe(name))
        if view is not None and ("default" in entry or any(k.startswith("by_") and k != "by_link" for k in entry)):
            try:
                entry["value_for_gpu"] = view(name)
                entry["value_for_gpu_from"] = view.used[name]["from"]
            except KeyError:
                pass
        hits = [say("va_at_bound", level=b["level"], value=b["value"],
                    side=say("va_bound_" + b["side"]) if b["side"] in ("low", "high") else b["side"])
                for b in bounds if b["name"] == name]
        if hits:
            entry["at_bound"] = hits
        doc[name] = entry
    if args.json:
        print_json({"efficiencies": doc, "precedence": list(PRECEDENCE)})
    else:
        from rich.table import Table
        from rich.text import Text

        from ..report.tables import fit

        from ..i18n.efficiencies import efficiency_text, efficiency_unit
        from ..i18n.notes import localize

        table = Table(title=tr("eff_title", lang))
        for col in ("name", "value", "unit", "basis", "description"):  # names whole; the texts wrap at spaces
            table.add_column(tr("eff_" + col, lang), no_wrap=col == "name", overflow="fold")
        for name, e in doc.items():
            value = e.get("value_for_gpu", e.get("default", tr("eff_per", lang).format(
                keys=",".join(k[3:] for k in e if k.startswith("by_")))))
            if "value_for_gpu_from" in e:
                value = f"{value:.4g} ({e['value_for_gpu_from']})"
            flag = (" ⚠ " + tr("eff_at_bound", lang) + "; ".join(localize(x, lang) for x in e["at_bound"])
                    if e.get("at_bound") else "")
            table.add_row(name, Text(str(value) + flag), efficiency_unit(e.get("unit", ""), lang),
                          efficiency_text(e.get("basis", ""), lang), efficiency_text(e.get("description", ""), lang))
        console().print(fit(table))  # whole, or one block per name
        console().print(Text(tr("precedence", lang) + ":\n" +
                             "\n".join(f"  {i}. {localize(p, lang)}" for i, p in enumerate(PRECEDENCE, 1))))
    return 0
