"""`autovalidators quickstart --train`: the whole loop on the bundled samples, on a CPU.

prepare (bundled XQuAD/TyDi QA contexts and tone samples) -> train small versions of the three
validators through the same `TaskSpec`/`TaskConfig`/trainer/exporter as `train <task>` -> ONNX int8
with the export's parity and quality rules -> a light benchmark on each held-out split -> validate
the bundled example cases with the fresh models -> the HTML report. Everything lands in one folder.

Nothing heavy is imported here: `pipeline.run_quickstart` imports torch inside the stages.
"""

from autovalidators.training.quickstart.config import QuickstartTrainConfig, load_quickstart_config

__all__ = ["QuickstartTrainConfig", "load_quickstart_config"]
