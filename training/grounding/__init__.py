"""The sentence-grounding fact-span model's learned parts besides the cross-encoder: the stacked
combiner (`combiner`, `selection`, `export`), the word narrower, and `autovalidators combiner`.
"""
