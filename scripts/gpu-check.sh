#!/usr/bin/env bash
# On a GPU host (CUDA driver for torch 2.14; the package registry reachable, or the GPU venv already
# in its cache folder): the vLLM tests and the side-by-side bench on vllm 0.33.0, in under 8 minutes.
#   bash scripts/gpu-check.sh [OUT]      OUT (default gpu-check/) gets the logs and bench JSON
# Not run yet: no GPU host was available where this was written (see docs/scale.md).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-check}"
mkdir -p "$out"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
export SPECDEC_VLLM_VENV="$(bash scripts/vllm-env.sh --gpu | tail -1)"
# vLLM on a GPU: the CPU-only settings (VLLM_CPU_KVCACHE_SPACE) are ignored; keep its memory share small.
export SPECDEC_VLLM_EXTRA="--gpu-memory-utilization 0.30"
start=$(date +%s)
timeout 300 python -m pytest tests/test_vllm.py tests/test_vllm_frontends.py -q -x -p no:cacheprovider 2>&1 | tee "$out/tests.txt"
port=8207
python -m specdec vllm serve --gpu --method eagle --port "$port" --log "$out/vllm-eagle.log" \
  --extra --gpu-memory-utilization 0.30 > "$out/serve.txt" 2>&1 &
serve=$!
trap 'kill -INT "$serve" 2>/dev/null || true; wait "$serve" 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q "serving model" "$out/serve.txt" && break; sleep 1; done
timeout 180 python -m specdec bench --backend "http://127.0.0.1:$port/v1" --limit 16 --max-new-tokens 128 \
  --concurrency 8 --json "$out/bench-eagle.json" 2>&1 | tee "$out/bench.txt"
echo "gpu-check: $(($(date +%s) - start)) s; results in $out/"
