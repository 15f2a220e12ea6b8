"""The report's number formatting: :mod:`toolbias_stats._format` (a core module, so that result objects print
p-values the same way without importing the report layer)."""

from .._format import MISSING, fmt_ci, fmt_estimate_ci, fmt_int, fmt_level, fmt_mean_sd, fmt_num, fmt_p, fmt_range

__all__ = ["MISSING", "fmt_num", "fmt_int", "fmt_ci", "fmt_estimate_ci", "fmt_mean_sd", "fmt_p", "fmt_level",
           "fmt_range"]
