"""BiasBusters Table 1 (Blankenstein et al., sec. 4.2): mean across clusters and runs ± std across runs.

Values copied from ../shared/papers/biasbusters.txt (Table 1) and ../shared/data/biasbusters/README.md.
Keys are the model names used in data/biasbusters/study.toml.
"""

TABLE1 = {
    # model: (delta_api, sd), (delta_pos, sd), (delta_model, sd)
    "GPT-3.5-turbo": ((0.320, 0.022), (0.336, 0.012), (0.328, 0.005)),
    "GPT-4.1 mini": ((0.331, 0.008), (0.423, 0.002), (0.377, 0.004)),
    "Claude 3.5 Sonnet": ((0.370, 0.005), (0.325, 0.005), (0.347, 0.001)),
    "Gemini 2.5 Flash": ((0.365, 0.003), (0.306, 0.005), (0.335, 0.002)),
    "DeepSeek-V3.2-Exp": ((0.249, 0.003), (0.504, 0.003), (0.377, 0.001)),
    "ToolLLaMA-2-7B": ((0.277, 0.002), (0.391, 0.002), (0.334, 0.002)),
    "Qwen3 235B": ((0.330, 0.006), (0.168, 0.004), (0.249, 0.001)),
}
