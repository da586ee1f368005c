"""The ``presidio`` guardrail: Microsoft Presidio's analyzer over the request's texts (an extra:
``pip install 'llm-gateway[presidio]'``; the other kinds never import it).

Its named-entity recognizers need a spaCy model, named in config (``model = "en_core_web_lg"``);
startup fails naming what to install when the package or the model is missing. ``model =
"blank:en"`` runs Presidio's pattern recognizers (email, card, IBAN, phone …) over a blank spaCy
pipeline, without a model download. On answers it judges each block whole (it cannot scan a
stream piecewise): ``engine.WholeBlock``.
"""

from __future__ import annotations

from typing import Any

from gateway.guardrails.scanner import Hit

INSTALL = "pip install 'llm-gateway[presidio]'"


class PresidioUnavailable(ValueError):
    pass


class PresidioRedactor:
    def __init__(self, name: str, model: str, entities: list[str] | None, language: str = "en") -> None:
        try:
            import spacy
            from presidio_analyzer import AnalyzerEngine
            from presidio_analyzer.nlp_engine import SpacyNlpEngine
        except ImportError as exc:
            raise PresidioUnavailable(
                f"guardrail {name!r}: kind presidio needs {INSTALL} ({exc.name} is missing)"
            ) from None
        if model.startswith("blank:"):
            nlp = spacy.blank(model.partition(":")[2] or language)
        else:
            try:
                nlp = spacy.load(model)
            except OSError:
                raise PresidioUnavailable(
                    f"guardrail {name!r}: the spaCy model {model!r} is not installed "
                    f'(python -m spacy download {model}, or model = "blank:{language}")'
                ) from None
        engine = SpacyNlpEngine(models=[{"lang_code": language, "model_name": model}])
        setattr(engine, "nlp", {language: nlp})  # noqa: B010 (the loaded pipeline, not a model name)
        self.analyzer: Any = AnalyzerEngine(nlp_engine=engine, supported_languages=[language])
        self.entities, self.language = entities, language

    def redact(self, text: str) -> tuple[str, list[Hit]]:
        results = self.analyzer.analyze(text=text, language=self.language, entities=self.entities)
        chosen: list[Hit] = []
        for r in sorted(results, key=lambda r: (r.start, -(r.end - r.start))):
            if chosen and r.start < chosen[-1].end:
                continue  # overlapping: the earlier, longer one wins
            chosen.append(Hit(r.start, r.end, r.entity_type))
        if not chosen:
            return text, []
        out, pos = [], 0
        for h in chosen:
            out += [text[pos : h.start], f"[REDACTED:{h.type}]"]
            pos = h.end
        out.append(text[pos:])
        return "".join(out), chosen
