"""The web calculator's HTTP API: form fields in, the same numbers, tables and plots as the CLI out.

Every request builds its own objects (no module-level mutable state); a pasted config.json lives in a temporary
directory for the length of one request and is read by the same reader as `--model ./config.json`.
"""


import contextlib
import io
import os
import tempfile
import zipfile
from importlib import resources
from typing import Any, Iterator

from ..errors import SpecError, TrainfitError, sentence_of
from ..i18n import LANGS, Msg, say
from .guard import MAX_BODY, BodyTooLarge, too_large
from .responses import _known_lang, _one_line, error_response, error_text  # noqa: F401 - error_text: kept here
from .words import words

INTS = ("seq_len", "micro_batch", "grad_accum", "gpus", "lora_rank", "epochs")
WORKLOAD = ("method", "seq_len", "micro_batch", "grad_accum", "grad_ckpt", "lora_rank")


def _lang(form: dict[str, Any]) -> str:
    lang = str(form.get("lang") or "en")
    if lang not in LANGS:
        raise SpecError(say("ec_ui_lang", choices=", ".join(LANGS), value=lang))
    return lang


def _int(form: dict[str, Any], name: str, default: int) -> int:
    """A whole number as argparse's type=int reads it (the CLI's path), with the field named."""
    value = form.get(name)
    if value in (None, ""):
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        raise SpecError(say("ec_ui_not_whole", field=name.replace("_", "-"), value=value)) from None


def workload(form: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"method": str(form.get("method") or "full"),
                           "grad_ckpt": str(form.get("grad_ckpt") or "none")}
    for name, default in (("seq_len", 2048), ("micro_batch", 1), ("grad_accum", 1), ("lora_rank", 16)):
        out[name] = _int(form, name, default)
    return out


def _renamed(sentence: Msg, old: str, new: str) -> Msg:
    """`sentence` with `old` replaced by `new` in its text values (and in the sentences inside it)."""
    values = {k: _renamed(v, old, new) if isinstance(v, Msg) else v.replace(old, new) if isinstance(v, str) else v
              for k, v in sentence.values.items()}
    return Msg(sentence.key, values)


@contextlib.contextmanager
def model_arg(form: dict[str, Any]) -> Iterator[str]:
    """The --model argument: a preset name, or a pasted config.json written to a private temporary file."""
    from ..catalog.models import all_models

    text = str(form.get("config") or "").strip()
    if text:
        with tempfile.TemporaryDirectory(prefix="trainfit-ui-") as tmp:
            path = os.path.join(tmp, "config.json")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            try:
                yield path
            except TrainfitError as exc:  # name the pasted file as the user knows it, not by its temporary path
                sentence = sentence_of(exc)
                if isinstance(sentence, Msg) and path not in sentence:
                    raise  # a sentence of the message table (settings that cannot run together): worded from the table
                if isinstance(sentence, Msg):  # the same sentence of the table, naming the file as the user knows it
                    raise SpecError(_renamed(sentence, path, "config.json")) from None
                raise SpecError(str(exc).replace(path, "config.json")) from None
        return
    name = str(form.get("model") or "").strip()
    if not name:
        from ..i18n import say  # (a local name of this function: imported below too)

        raise SpecError(say("ec_ui_choose_model"))
    if name not in all_models():
        from ..errors import unknown_name
        from ..i18n import say

        raise unknown_name(say("ei_kind_model"), name, sorted(all_models()), hint=say("ei_hint_paste"))
    yield name


def _where(form: dict[str, Any]) -> tuple[str | None, str | None]:
    gpu = str(form.get("gpu") or "").strip() or None
    inst = str(form.get("instance") or "").strip() or None
    return (None if inst else gpu), inst


def do_estimate(form: dict[str, Any]) -> dict[str, Any]:
    from ..advise import alternatives_within
    from ..api import estimate, load_efficiencies
    from ..uncertainty import within_policy
    from ..report.document import body_html
    from ..report.estimate import estimate_dict
    from ..report.html_blocks import estimate_doc

    lang = _lang(form)
    gpu, inst = _where(form)
    eff = load_efficiencies()
    with model_arg(form) as model:
        est = estimate(model, gpu, instance=inst, gpus=_int(form, "gpus", 1), zero=_int(form, "zero", 0) or None,
                       efficiencies=eff, **workload(form))
    alts = alternatives_within(est, eff) if not within_policy(est) else []  # the one out-of-memory policy
    return {"result": estimate_dict(est, alts), "html": body_html(estimate_doc(est, alts, lang))}


def do_compare(form: dict[str, Any]) -> dict[str, Any]:
    from ..api import load_efficiencies
    from ..compare import compare
    from ..report.compare import compare_dict
    from ..report.document import body_html
    from ..report.html_blocks import compare_doc

    lang = _lang(form)
    with model_arg(form) as model:
        rows = compare(model, None, gpus=_int(form, "gpus", 1), zero=_int(form, "zero", 0) or None,
                       efficiencies=load_efficiencies(), **workload(form))
        name = rows[0].estimate.model.name if rows and rows[0].estimate else model
    return {"result": compare_dict(name, rows), "html": body_html(compare_doc(name, rows, lang))}


def _plan(form: dict[str, Any], model: str):
    from ..api import load_efficiencies
    from ..plan import make_plan
    from ..spec.request import request_from_mapping

    data: dict[str, Any] = {"model": model, "method": str(form.get("method") or "auto")}
    for key in ("dataset_tokens", "epochs", "deadline", "budget", "seq_len", "lora_rank"):
        value = str(form.get(key) or "").strip()
        if value:
            data[key] = value
    # what the form says: its GPU (or instance) is the plan's; a layout field moved off its default is kept
    # (given = pinned), the defaults shown (1 GPU, ZeRO 0, micro-batch 1, no checkpointing) leave the search free
    gpu, inst = _where(form)
    if inst:
        data["instance"] = inst
    elif gpu:
        data["gpu"] = gpu
    for key, default in (("gpus", "1"), ("zero", "0"), ("micro_batch", "1"), ("grad_ckpt", "none")):
        value = str(form.get(key) or "").strip()
        if value and value != default:
            data[key] = value
    return make_plan(request_from_mapping(data, where="form"), load_efficiencies())


def do_plan(form: dict[str, Any]) -> dict[str, Any]:
    from ..report.document import body_html
    from ..report.html_blocks import plan_doc
    from ..report.plan import plan_dict, plan_file

    lang = _lang(form)
    with model_arg(form) as model:
        plan = _plan(form, model)
        out = {"result": plan_dict(plan), "html": body_html(plan_doc(plan, lang))}
        out["plan_file"] = plan_file(plan) if plan.recommendations else None
    return out


def do_setup_zip(form: dict[str, Any]) -> bytes:
    """plan.json and the `trainfit generate` setup of the plan's recommendation, as one zip."""
    from ..generate import render_files
    from ..generate.setup import load_plan
    from ..report.plan import write_plan

    lang = _lang(form)
    with model_arg(form) as model:
        plan = _plan(form, model)
        if not plan.recommendations:
            raise SpecError(say("ec_ui_nothing_meets", constraint=(plan.binding or {}).get("constraint")))
        with tempfile.TemporaryDirectory(prefix="trainfit-ui-") as tmp:
            path = write_plan(plan, tmp)
            files = {"plan.json": open(path, encoding="utf-8").read(),
                     **render_files(load_plan(path), None, "output", lang)}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"trainfit-setup/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("launch.sh", "train.py") else 0o644) << 16
            zf.writestr(info, files[name], zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def options(lang: str) -> dict[str, Any]:
    from ..catalog.gpus import all_gpus
    from ..catalog.instances import all_instances
    from ..catalog.models import all_models

    return {"models": sorted(all_models()), "gpus": sorted(all_gpus()), "instances": sorted(all_instances()),
            "methods": ["full", "lora", "qlora", "freeze"], "grad_ckpt": ["none", "selective", "full"],
            "langs": list(LANGS), "words": words(lang if lang in LANGS else "en")}


def create_app(host: str | None = None, port: int | None = None):
    """The app; `serve` names the address it listens on, and only that address is answered (guard.Guard).
    With none (the in-process app of the tests) the loopback names and the test client's are, on any port."""
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    from .guard import Guard

    app = FastAPI(title="trainfit", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, host=host, port=port)
    page = resources.files("trainfit.ui").joinpath("static/index.html").read_text(encoding="utf-8")

    async def _form(request: Request) -> dict[str, Any]:
        chunks, size = [], 0
        async for chunk in request.stream():  # stops at the cap: a body without a Content-Length is not held
            size += len(chunk)
            if size > MAX_BODY:
                raise too_large()
            chunks.append(chunk)
        body = b"".join(chunks)
        from .. import userjson

        form = userjson.loads(body.decode("utf-8", errors="strict") or "{}", say("ec_ui_form")) if body else {}
        if not isinstance(form, dict):
            raise SpecError(say("ec_ui_form_object"))
        return form

    def endpoint(fn, binary: bool = False):
        async def handler(request: Request):
            from starlette.concurrency import run_in_threadpool

            lang = _known_lang(request.query_params.get("lang"))  # the page also names it in the URL
            try:
                form = await _form(request)
                lang = _known_lang(form.get("lang"), lang)
                try:
                    result = await run_in_threadpool(fn, form)
                finally:
                    if str(form.get("config") or "").strip():  # a pasted config may have added a cache file
                        from .guard import prune_cache

                        await run_in_threadpool(prune_cache)
            except BodyTooLarge as exc:
                response = error_response(exc, 413, lang)
                response.headers["Connection"] = "close"
                return response
            except (TrainfitError, UnicodeDecodeError, ValueError) as exc:
                return error_response(exc, 400, lang)
            except Exception as exc:  # noqa: BLE001 - a bug: one line for the page, never a traceback
                return error_response(RuntimeError(say("ec_internal_error", kind=type(exc).__name__,
                                                       detail=_one_line(exc))), 500, lang)
            if binary:
                return Response(result, media_type="application/zip",
                                headers={"Content-Disposition": 'attachment; filename="trainfit-setup.zip"'})
            return JSONResponse(result)
        return handler

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return page

    @app.get("/api/options")
    def get_options(lang: str = "en") -> dict[str, Any]:
        return options(lang)

    app.post("/api/estimate")(endpoint(do_estimate))
    app.post("/api/compare")(endpoint(do_compare))
    app.post("/api/plan")(endpoint(do_plan))
    app.post("/api/setup.zip")(endpoint(do_setup_zip, binary=True))
    return app


def serve(host: str = "127.0.0.1", port: int = 8765, sock=None) -> None:
    """Serve on host:port; `sock`, when given, is that address already bound (guard.bind)."""
    import uvicorn

    app = create_app(host, port)
    if sock is None:
        uvicorn.run(app, host=host, port=port, log_level="warning")
        return
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    server.run(sockets=[sock])
