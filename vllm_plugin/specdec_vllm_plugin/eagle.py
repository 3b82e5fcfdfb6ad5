"""vLLM's EAGLE-1 Llama head with the two parts this project's head has and the stock class lacks.

Contract: ``EagleSpecdecLlamaForCausalLM`` is vLLM's ``EagleLlamaForCausalLM`` with a bias on the
fusion layer ``fc`` and an RMSNorm as the first layer's input layernorm (the stock class drops
both, following the original EAGLE code). Weights come from ``specdec export vllm`` (``fc.bias``,
``layers.0.input_layernorm.weight``); everything else loads as in the stock class. Measured with the
stock class on converted weights: acceptance 0.55 at depth 1 against 0.735 with this one.
"""

from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.linear import ReplicatedLinear
from vllm.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from vllm.model_executor.models.utils import maybe_prefix


class EagleSpecdecLlamaForCausalLM(EagleLlamaForCausalLM):
    def __init__(self, *, vllm_config, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        model, h = self.model, self.config.hidden_size
        model.fc = ReplicatedLinear(
            input_size=2 * h,
            output_size=h,
            bias=True,
            params_dtype=vllm_config.model_config.dtype,
            quant_config=model.quant_config,
            prefix=maybe_prefix(prefix, "model.fc"),
            return_bias=False,
        )
        model.layers[0].input_layernorm = RMSNorm(h, eps=self.config.rms_norm_eps)
