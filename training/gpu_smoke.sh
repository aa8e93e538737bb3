#!/usr/bin/env bash
# GPU smoke run: on a machine with a GPU, in one call, for each validator (qa_relevance,
# fact_spans, tone): prepare its data, train a few hundred steps in bf16 through
# `accelerate launch`, export ONNX fp32 + int8, then print throughput (examples/s) and the parity
# check per task and write gpu_smoke.json. Configs are the project's (configs/qa_relevance.yaml,
# configs/fact_spans_model.yaml, configs/tone_model.yaml) with the overrides documented in
# training/gpu_smoke.py. Sized for ~8 minutes on one H200 after data preparation.
#
# Usage: training/gpu_smoke.sh [--cpu-dry-run] [--tasks qa_relevance,fact_spans,tone] [--steps N]
#   --cpu-dry-run  no GPU needed: a tiny random encoder, tiny data, 2 steps (tests the script itself)
# Environment:
#   OUT                       where gpu_smoke.json and the logs go (default: out/gpu_smoke)
#   SMOKE_WORK                work folder for configs, data, runs, models (default: a new temp folder)
#   AUTOVALIDATORS_DATA_ROOT  the shared datasets folder (default: ../shared/datasets)
#   SMOKE_PREPARED            already prepared data, <dir>/<task>/ (e.g. prepared): skips preparing
#   SMOKE_NUM_PROCESSES       accelerate processes = GPUs to use (default 1)
#   PYTHON                    interpreter with the project installed (default .venv/bin/python, else python3)
# Exit codes: 0 all tasks passed, 1 a step or check failed, 2 bad usage or setup, 3 no GPU visible.
set -euo pipefail

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

mode=gpu
tasks="qa_relevance,fact_spans,tone"
steps=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu-dry-run) mode=cpu ;;
    --tasks) tasks="${2:?--tasks needs a value}"; shift ;;
    --steps) steps="${2:?--steps needs a value}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_smoke: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"  # the configs' relative paths (configs/, ../shared/datasets) are from the repository root
py="${PYTHON:-}"
if [[ -z "$py" ]]; then
  if [[ -x .venv/bin/python ]]; then py=.venv/bin/python; else py=python3; fi
fi
out="${OUT:-out/gpu_smoke}"
work="${SMOKE_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_smoke.XXXXXX")}"
processes="${SMOKE_NUM_PROCESSES:-1}"
mkdir -p "$out" "$work/logs"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
helper=("$py" -m autovalidators.training.gpu_smoke)
cli=("$py" -m autovalidators.inference.cli)

if ! "$py" -c "import autovalidators.training" 2>/dev/null; then
  echo "gpu_smoke: $py cannot import autovalidators; install it: $py -m pip install -e '.[train]'" >&2
  exit 2
fi
config_args=(--mode "$mode" --work "$work" --tasks "$tasks" --processes "$processes"
             --data-root "${AUTOVALIDATORS_DATA_ROOT:-../shared/datasets}")
[[ -n "$steps" ]] && config_args+=(--steps "$steps")
[[ -n "${SMOKE_PREPARED:-}" ]] && config_args+=(--prepared "$SMOKE_PREPARED")
plan="$("${helper[@]}" configs "${config_args[@]}")"  # exits 3 when no GPU is visible

# Runs one step with its output shown and kept in $work/logs/<task>_<stage>.log, and records its
# exit code and duration; returns the step's exit code.
step() {
  local task="$1" stage="$2"; shift 2
  local log="$work/logs/${task}_${stage}.log" started rc
  started="$(date +%s.%N)"
  echo "== $task: $stage: $*" >&2
  set +e
  "$@" </dev/null 2>&1 | tee "$log"  # stdin closed: the step must not eat the task plan being read
  rc="${PIPESTATUS[0]}"
  set -e
  "${helper[@]}" record --work "$work" --task "$task" --stage "$stage" --rc "$rc" --log "$log" \
    --started "$started" --ended "$(date +%s.%N)"
  return "$rc"
}

launch=("$py" -m accelerate.commands.launch --num_machines 1 --num_processes "$processes" --dynamo_backend no)
[[ "$mode" == cpu ]] && launch+=(--cpu --num_cpu_threads_per_process 1)
[[ "$processes" -gt 1 ]] && launch+=(--multi_gpu)

while IFS=$'\t' read -r task cli_name config needs_prepare precision run models; do
  # A failed step skips the rest of its task; the other tasks still run and the summary says why.
  if [[ "$needs_prepare" == 1 ]]; then
    step "$task" prepare "${cli[@]}" prepare "$cli_name" --config "$config" || continue
  fi
  step "$task" train "${launch[@]}" --mixed_precision "$precision" \
    -m autovalidators.inference.cli train "$cli_name" --config "$config" || continue
  step "$task" export "${cli[@]}" export "$cli_name" --run "$run" --to "$models" --config "$config" || continue
done <<< "$plan"

# One log file beside the JSON (a device machine hands back only a few files from $OUT).
for log in "$work"/logs/*.log; do
  [[ -f "$log" ]] && { echo "===== $(basename "$log")"; cat "$log"; }
done > "$out/gpu_smoke.log"
"${helper[@]}" summarize --work "$work" --out "$out" --processes "$processes"
