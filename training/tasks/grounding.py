"""Grounding: is this claim (one answer sentence) supported by this evidence (one context chunk)?

A sentence-pair cross-encoder, NLI-style (as MiniCheck, AlignScore and HHEM are): input
`[CLS] evidence [SEP] claim [SEP]`, truncated longest-first (the evidence: claims are short) to
`max_length`; output P(supported) = softmax(logits)[1]. Trained on NLI pairs plus the judged
sentence claims of `prepare grounding`, each claim paired with its best context chunk
(`inference.grounding`), so training sees the evidence the runtime will give it.

Its score is one feature of the fact-span combiner (`training/grounding/combiner.py`), not a decision by
itself: on long-form answers lexical overlap is the stronger signal and the combiner weighs both.
"""

from __future__ import annotations

from autovalidators.data_prep.fact_spans.grounding import GroundingPrepareConfig, prepare

from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.qa_relevance import PairSpec

THRESHOLD_KEY = "supported"


SPEC = PairSpec(
    name="grounding",
    labels=("unsupported", "supported"),
    problem_type="single_label",
    prepare_schema=GroundingPrepareConfig,
    prepare_fn=prepare,
    main_metric="roc_auc",
    window_aggregation="best_chunk",
    first="evidence", second="claim", threshold_key=THRESHOLD_KEY,
    example={"evidence": "The Normans gave their name to Normandy, a region in France, in the 10th century.",
             "claim": "Normandy was named after the Normans."},
    extra={"input": "[CLS] evidence [SEP] claim [SEP]", "score": "softmax(logits)[1]",
           "evidence": "the claim's best context chunk by shared content stems (inference.grounding)"},
)

GroundingConfig = TaskConfig[GroundingPrepareConfig]
