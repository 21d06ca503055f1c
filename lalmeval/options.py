"""How a run treats stored work: resume, cache, inference-only, rescore-only, forced re-inference."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    use_cache: bool = True        # --no-cache turns the inference cache off
    skip_eval: bool = False       # --skip-eval: inference only
    reeval: bool = False          # --reeval: score stored predictions, send nothing
    force_reinfer: bool = False   # --force-reinfer: ignore stored predictions and cached replies
    grace: float = 10.0           # seconds in-flight requests get after the first Ctrl-C
    cache_sampled: bool = False   # config cache_sampled: also reuse replies sampled at temperature > 0
    allow_config_change: bool = False  # --allow-config-change: continue a run whose stored config differs
