"""Held-out quality and latency of each trained validator (`autovalidators benchmark <task>`).

`common` holds what every benchmark shares (timing, torch reference, table, manifest update);
one module per task scores its held-out sets beside the heuristic with paired bootstraps.
"""
