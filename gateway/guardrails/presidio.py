"""The ``presidio`` guardrail: Microsoft Presidio's analyzer over the request's texts (an extra:
``pip install 'llm-gateway[presidio]'``; the other kinds never import it).

Its named-entity recognizers need a spaCy model, named in config (``model = "en_core_web_lg"``);
startup fails naming what to install when the package or the model is missing. ``model =
"blank:en"`` runs Presidio's pattern recognizers (email, card, IBAN, phone …) over a blank spaCy
pipeline, without a model download. On answers it judges each block whole (it cannot scan a
stream piecewise), when the block ends.

An analysis is CPU-bound and long (~2.4 s for a 48 KB block with every entity type), so it never
runs on the event loop: ``analyze`` runs it on a small executor of its own (``WORKERS`` threads,
shared by every presidio guardrail), not the loop's default one, so that N concurrent big
requests queue here instead of taking every thread the store and DNS lookups need. Presidio is
Python under the GIL, so more threads would not analyze faster; the loop keeps serving (other
requests, keepalives) because the interpreter switches threads every few milliseconds. An
analysis that has not finished within ``timeout`` (queueing included) ends like a webhook that
did not answer (``fail``); the thread finishes its text in the background (a thread cannot be
interrupted), an analysis still queued is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gateway.guardrails.scanner import Hit

INSTALL = "pip install 'llm-gateway[presidio]'"
WORKERS = 2

log = logging.getLogger("gateway.guardrails")
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="presidio")
    return _pool


class PresidioTimeout(Exception):
    """The analysis did not finish within the guardrail's ``timeout_ms``."""


class PresidioUnavailable(ValueError):
    pass


class PresidioRedactor:
    def __init__(
        self,
        name: str,
        model: str,
        entities: list[str] | None,
        language: str = "en",
        timeout: float = 10.0,
        fail_open: bool = False,
    ) -> None:
        # presidio's email recognizer asks tldextract, which fetches the public suffix list from
        # publicsuffix.org on first use (a gateway sends nothing but its upstream calls): its bundled
        # snapshot instead, unless the operator named a list (read when tldextract is imported)
        os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
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
        self.name, self.timeout, self.fail_open = name, timeout, fail_open
        # the first analysis loads what the recognizers load lazily (the suffix list, the pipeline's
        # tables): ~0.2 s holding the GIL, paid here at startup, not inside the first request's stream
        self.redact("warm-up jane.roe@example.com 555-0100")

    async def analyze(self, texts: list[str]) -> list[tuple[str, list[Hit]]]:
        """``redact`` over each text, off the event loop, within ``timeout``; raises
        ``PresidioTimeout`` when it takes longer."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(_executor(), self.redact_all, texts)
        try:
            return await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            log.warning(
                "guardrail %s: presidio took longer than %d ms; failing %s",
                self.name,
                round(self.timeout * 1000),
                "open" if self.fail_open else "closed",
            )
            raise PresidioTimeout from None

    def redact_all(self, texts: list[str]) -> list[tuple[str, list[Hit]]]:
        return [self.redact(t) for t in texts]

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
