"""Fact-span data: one span-labelled record format, converters, atomic facts, synthesis, splits.

`converters` (RAGTruth, FaithBench, SQuAD-format sets) -> `schema.SpanRecord`; `atomic_facts`
(clause-level facts, alignment, token masks); `synthesis` + `perturb` (labelled synthetic and
counterfactual answers); `build` (held-out benchmark set, grouped splits, data card); `cli`
(`autovalidators prepare fact-spans`). The runtime windowing lives in `inference.windowing`.
"""
