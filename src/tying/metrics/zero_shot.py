"""Table 7's zero-shot accuracies through EleutherAI's lm-eval harness (the optional `eval` extra).

A module of its own so that only the job that runs lm-eval needs it installed (workflow/envs/eval.yaml).
"""

import pandas as pd

from tying.errors import PipelineError
from tying.runtime import resolve_device

LM_EVAL_METRICS = ("acc", "acc_norm")
INSTALL_EVAL = "pip install -c constraints.txt -e '.[eval]'"


def lm_eval_scores(
    model_dir, tasks, *, num_fewshot=0, batch_size=8, limit=None, include_path=None, device="cpu", dtype="float32"
):
    """Rows (metric, value): each task's accuracy (and length-normalised accuracy where the task has
    it) from lm-eval's `simple_evaluate` on the checkpoint `model_dir`, named "<task> <metric>"."""
    try:
        import lm_eval  # here: the `eval` extra is optional; only lm_eval jobs need it
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise PipelineError(f"downstream.lm_eval needs lm-eval, the `eval` extra: {INSTALL_EVAL}") from None
    manager = task_index(TaskManager, tasks, include_path)
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        raise PipelineError(f"downstream.lm_eval.tasks: unknown to lm-eval: {', '.join(unknown)}")
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": str(model_dir), "dtype": dtype},
        tasks=list(tasks),
        num_fewshot=num_fewshot,
        batch_size=batch_size,
        device=resolve_device(device),
        limit=limit,
        task_manager=manager,
        log_samples=False,
        bootstrap_iters=0,
    )
    rows = [
        {"metric": f"{task} {name}", "value": float(results["results"][task][f"{name},none"])}
        for task in tasks
        for name in LM_EVAL_METRICS
        if f"{name},none" in results["results"][task]
    ]
    return pd.DataFrame(rows, columns=["metric", "value"])


def task_index(task_manager, tasks, include_path):
    """lm-eval's index of `include_path`'s task files alone when every task named is a single task there (its
    files take precedence over lm-eval's own anyway); else of lm-eval's own too, 14k files that take ~16 s
    to read."""
    if include_path:
        local = task_manager(include_path=include_path, include_defaults=False)
        if set(tasks) <= set(local.all_subtasks):
            return local
    return task_manager(include_path=include_path)
