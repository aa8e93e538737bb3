"""LLM labeller: asks an OpenAI-compatible chat model for the tone labels of batches of texts.

- The prompt is a versioned file (`configs/prompts/tone_labeller_v*.yaml`); its version goes
  into every label's provenance.
- Texts go in batches of `batch_size`, numbered; the reply must be JSON with one item per number.
  An unusable reply (not JSON, missing items, values other than 0/1/null) is asked once more per
  `max_attempts`; what is still missing afterwards stays missing (None), never guessed.
- HTTP retries/backoff and the raw-reply cache are the ChatClient's. On top of that a per-text
  label cache (key: prompt version, model, labels, text) lets a rerun with different batching, or
  after a crash, skip every text already labelled.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Protocol, Sequence

from pydantic import BaseModel, ConfigDict

from .config import LabelSpec, LLMSettings, TonePrompt

logger = logging.getLogger(__name__)


class _Chat(Protocol):
    model: str

    def complete(self, messages: list[dict[str, Any]], **params: Any) -> str: ...


class LLMItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int
    labels: dict[str, int | None]


class LLMReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    items: list[LLMItem]


def build_client(settings: LLMSettings) -> _Chat:
    """The project's ChatClient for `settings` (imported here: the CLI must start without it)."""
    from autovalidators.inference.llm_client import ChatClient

    return ChatClient(settings.base_url, settings.model, api_key_env=settings.api_key_env,
                      timeout_s=settings.timeout_s, max_retries=settings.max_retries,
                      cache_dir=Path(settings.cache_dir) / "replies")


class LLMLabeller:
    name = "llm"

    def __init__(self, settings: LLMSettings, prompt: TonePrompt, labels: dict[str, LabelSpec],
                 client: _Chat | None = None):
        self.settings = settings
        self.prompt = prompt
        self.labels = [n for n in labels if settings.labels is None or n in settings.labels]
        self.descriptions = {n: labels[n].description for n in self.labels}
        self.client = client if client is not None else build_client(settings)
        self.cache_dir = Path(settings.cache_dir) / "labels"
        self.stats = {"requests": 0, "cached_texts": 0, "labelled_texts": 0, "unlabelled_texts": 0, "bad_replies": 0}

    # -- cache ------------------------------------------------------------------------------

    def _key(self, text: str) -> str:
        blob = json.dumps([self.prompt.version, self.client.model, self.labels, self.prompt.system,
                           self.prompt.user, text], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _cached(self, key: str) -> dict[str, int | None] | None:
        path = self.cache_dir / key[:2] / f"{key}.json"
        try:
            return json.loads(path.read_text("utf-8"))["labels"]
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None

    def _store(self, key: str, labels: dict[str, int | None]) -> None:
        path = self.cache_dir / key[:2] / f"{key}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"version": self.prompt.version, "labels": labels}), "utf-8")
            tmp.replace(path)
        except OSError as exc:
            logger.warning("could not cache LLM labels at %s: %s", path, exc)

    # -- labelling --------------------------------------------------------------------------

    def label(self, texts: Sequence[str]) -> list[tuple[dict[str, int | None], dict[str, str]]]:
        """Per text: ({label: 1/0/None}, {label: provenance detail}), in input order."""
        from autovalidators.inference.llm_client import LLMError

        results: list[dict[str, int | None] | None] = [None] * len(texts)
        todo: list[int] = []
        for index, text in enumerate(texts):
            cached = self._cached(self._key(text))
            if cached is not None:
                results[index] = cached
                self.stats["cached_texts"] += 1
            else:
                todo.append(index)
        if self.settings.max_texts is not None and len(todo) > self.settings.max_texts:
            logger.warning("LLM labeller: %d texts to label, capped at max_texts=%d; the rest stay unlabelled",
                           len(todo), self.settings.max_texts)
            todo = todo[: self.settings.max_texts]
        size = self.settings.batch_size
        for start in range(0, len(todo), size):
            batch = todo[start:start + size]
            try:
                labelled = self._batch([texts[i] for i in batch])
            except LLMError as exc:
                # One failed batch must not sink the run: its texts stay unlabelled and are counted.
                logger.warning("LLM labeller: batch of %d texts failed (%s); they stay unlabelled", len(batch), exc)
                labelled = [None] * len(batch)
            for index, labels in zip(batch, labelled):
                if labels is None:
                    self.stats["unlabelled_texts"] += 1
                    continue
                results[index] = labels
                self.stats["labelled_texts"] += 1
                self._store(self._key(texts[index]), labels)
        detail = f"{self.prompt.version} ({self.client.model})"
        out = []
        for labels in results:
            votes = {n: (labels or {}).get(n) for n in self.labels}
            out.append((votes, {n: detail for n, v in votes.items() if v is not None}))
        return out

    def messages(self, texts: Sequence[str], attempt: int = 1) -> list[dict[str, str]]:
        label_lines = "\n".join(f"- {n}: {d}" for n, d in self.descriptions.items())
        numbered = []
        for number, text in enumerate(texts, start=1):
            limit = self.settings.max_text_chars
            shown = text if len(text) <= limit else text[:limit] + f" [... cut, {len(text) - limit} more characters]"
            numbered.append(f"{number}. {json.dumps(shown, ensure_ascii=False)}")
        user = self.prompt.user.replace("{texts}", "\n".join(numbered))
        if attempt > 1:
            # Temperature is 0, so an identical request would get the identical bad reply.
            user += f"\n\n(Attempt {attempt}: reply with the JSON object only, one item for each of the {len(texts)} texts.)"
        return [{"role": "system", "content": self.prompt.system.replace("{labels}", label_lines)},
                {"role": "user", "content": user}]

    def _batch(self, texts: Sequence[str]) -> list[dict[str, int | None] | None]:
        from autovalidators.inference.llm_client import LLMOutputError, parse_json_reply

        params: dict[str, Any] = {"temperature": 0.0}
        if self.prompt.json_mode:
            params["response_format"] = {"type": "json_object"}
        found: dict[int, dict[str, int | None]] = {}
        for attempt in range(1, self.settings.max_attempts + 1):
            self.stats["requests"] += 1
            text = self.client.complete(self.messages(texts, attempt), **params)
            try:
                reply = parse_json_reply(text, LLMReply, strict=False)
            except LLMOutputError as exc:
                self.stats["bad_replies"] += 1
                logger.warning("LLM labeller: unusable reply (attempt %d/%d): %s", attempt,
                               self.settings.max_attempts, exc)
                continue
            for item in reply.items:
                labels = self._clean(item)
                if labels is not None and 1 <= item.id <= len(texts):
                    found.setdefault(item.id, labels)
            if len(found) == len(texts):
                break
            self.stats["bad_replies"] += 1
            logger.warning("LLM labeller: reply covered %d of %d texts (attempt %d/%d)", len(found), len(texts),
                           attempt, self.settings.max_attempts)
        return [found.get(number) for number in range(1, len(texts) + 1)]

    def _clean(self, item: LLMItem) -> dict[str, int | None] | None:
        """The item's labels, or None when any value is not 0, 1 or null (then the item is unusable)."""
        labels: dict[str, int | None] = {}
        for name in self.labels:
            value = item.labels.get(name)
            if value not in (0, 1, None):
                return None
            labels[name] = value
        return labels
