"""A structure's notes that are sentences of the message table survive the disk cache (catalog/generic.py stores
their [key, values] beside the English): read back, they render in Chinese again; a cache file without them keeps
its English."""

import json

from trainfit.catalog import generic
from trainfit.catalog.models import resolve_model
from trainfit.i18n import Msg, say


def test_a_cached_structure_note_renders_in_chinese_again():
    spec = resolve_model("qwen3-30b-a3b")
    note = say("va_gen_no_torch", model=spec.model_type, made="5.0.0", installed="5.1.0")
    noted = generic._with_note(spec, note)
    stored = json.loads(json.dumps({**generic.spec_to_dict(noted), "said": generic._said(noted.structure.notes)}))
    back = generic.spec_from_dict(stored, spec.name, spec.source, spec.params_reported, {})
    again = [n for n in back.structure.notes if n == note]
    assert again and isinstance(again[0], Msg) and again[0].render("zh") == note.render("zh") != str(note)
    old = generic.spec_from_dict({k: v for k, v in stored.items() if k != "said"}, spec.name, spec.source,
                                 spec.params_reported, {})
    kept = [n for n in old.structure.notes if n == note]
    assert kept and not isinstance(kept[0], Msg)  # an older cache file: the same English, no other language
