"""Tone labelling: gold mappings, lexicon and LLM labellers, merge, splits, and the assessor check.

Commands (`autovalidators label ...`, see `cli.py`):
- `tone --out DIR`: label the sources in `configs/tone.yaml`, merge, split, write JSONL + data card;
- `sample-for-review --input DIR --out review.csv`: a stratified sample for people to label;
- `agreement --review review.csv --out DIR`: kappa/precision/recall per label; exit 1 under a floor.

Modules: `config` (typed config), `records` (record format and merge rule), `sources` (gold),
`lexicon`, `llm`, `pipeline`, `assess`, `report`.
"""
