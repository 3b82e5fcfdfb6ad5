"""specdec's vLLM plugin: registers the exact EAGLE class of this project's head with vLLM.

Contract: the ``vllm.general_plugins`` entry point ``specdec_eagle`` calls ``register()`` in every
vLLM process (the API server and each spawned engine process), which registers the architecture
``EagleSpecdecLlamaForCausalLM`` lazily (by module path: nothing heavy is imported until vLLM
builds the model). Why a plugin: vLLM spawns its engine processes, so a ``register_model`` call in
the launching script never reaches them; an entry point does. Installed into the vLLM venv only.
"""

ARCH = "EagleSpecdecLlamaForCausalLM"


def register() -> None:
    from vllm import ModelRegistry

    if ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(ARCH, "specdec_vllm_plugin.eagle:EagleSpecdecLlamaForCausalLM")
