"""BiasBusters Table 4 (Blankenstein et al., Appendix F.1) and the R^2 values of its Figure 13 text.

Values typed from ../shared/papers/biasbusters.txt, "Table 4: Correlation between API-level features
and model selection rates. Each entry shows Pearson r with its p-value." (three LLMs), and from the
paragraph under it: "R^2 is modest -- 0.143 for GPT-4.1 mini and 0.387 for ToolLLaMA".
Keys are the LLM names used in data/biasbusters/authors_features.json (the paper's GPT-4.1 mini is
"ChatGPT 4.1" there). The paper rounds to three decimals; tests compare to +-0.001 (+ float slack).

How they are reproduced (tests/models/test_correlation.py, test_ols.py): each feature minus its
cluster mean over the tools where it is present (NaN ignored), then Pearson r with pairwise-complete
rows (n = 50; n = 43 for age_days). OLS: the same centred features, complete cases (43 rows), all seven
predictors plus an intercept, target = the authors' selection rate.
"""

#: feature -> {LLM: (r, p)}
TABLE4 = {
    "avg_similarity_tool_desc": {"ChatGPT 4.1": (0.227, 0.113), "Gemini": (-0.092, 0.526), "Qwen": (0.234, 0.101)},
    "avg_similarity_api_desc": {"ChatGPT 4.1": (0.111, 0.442), "Gemini": (0.330, 0.019), "Qwen": (0.411, 0.003)},
    "age_days": {"ChatGPT 4.1": (-0.199, 0.201), "Gemini": (-0.144, 0.356), "Qwen": (-0.163, 0.296)},
    "desc_name_length_sum": {"ChatGPT 4.1": (0.044, 0.760), "Gemini": (0.103, 0.477), "Qwen": (0.038, 0.795)},
    "num_params": {"ChatGPT 4.1": (-0.065, 0.653), "Gemini": (0.038, 0.793), "Qwen": (-0.185, 0.198)},
    "flesch_reading_ease": {"ChatGPT 4.1": (0.160, 0.267), "Gemini": (0.176, 0.222), "Qwen": (0.098, 0.496)},
    "positive_word_count": {"ChatGPT 4.1": (0.126, 0.384), "Gemini": (0.087, 0.547), "Qwen": (0.093, 0.521)},
}

#: In-sample OLS R^2 (BiasBusters F.1, text under Table 4 / Figure 13).
OLS_R2 = {"ChatGPT 4.1": 0.143, "ToolLLaMA": 0.387}

#: Rows used: all 50 tools, 43 with an age (7 APIs have none in the authors' table).
N_ROWS = {"age_days": 43, "other": 50}
