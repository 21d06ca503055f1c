"""How a run treats stored work: resume, cache, inference-only, rescore-only, forced re-inference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class RunOptions:
    use_cache: Optional[bool] = None  # --cache / --no-cache; None: the config's `cache` (off by default)
    run_judgments: bool = True    # without the cross-run cache, judgments are still reused within their own run (resume, --reeval); --no-cache: not even there
    skip_eval: bool = False       # --skip-eval: inference only
    reeval: bool = False          # --reeval: score stored predictions, send nothing
    force_reinfer: bool = False   # --force-reinfer: ignore stored predictions and cached replies
    grace: float = 10.0           # seconds in-flight requests get after the first Ctrl-C
    cache_sampled: bool = False   # config cache_sampled: also reuse replies sampled at temperature > 0
    allow_config_change: bool = False  # --allow-config-change: continue a run whose stored config differs
