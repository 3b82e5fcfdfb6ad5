"""Beyond one machine: export the target, the draft and the heads for vLLM, and start vLLM on them.

Contract: ``vllm`` writes vLLM-ready folders (``specdec export vllm OUT``) through strict tensor maps
(``vllm_maps``); ``vllm_launch`` starts vLLM's OpenAI server from its own virtualenv
(scripts/vllm-env.sh). Nothing in the package imports this. docs/scale.md.
"""
