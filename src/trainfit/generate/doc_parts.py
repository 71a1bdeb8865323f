"""What the README of every generated setup shares, below docs.py (train.py's setups) and stack_docs.py (Megatron-LM
and torchtitan's): the plan's numbers as the README shows them, and the section on the scheduler target."""

from __future__ import annotations

from .common import Setup


def _numbers(setup: Setup) -> dict:
    c = setup.choice
    cost = f"{c['cost']:,.0f} {c['currency']}" if c.get("cost") is not None else "—"
    hours = f"{c['hours']:,.1f}" if c.get("hours") is not None else "—"
    return {"memory": f"{c.get('memory_gib', 0):,.1f}", "usable": f"{c.get('gpu_memory_gib') or 0:,.1f}",
            "tps": f"{c.get('tokens_per_s') or 0:,.0f}", "hours": hours, "cost": cost,
            "bottleneck": c.get("bottleneck", ""), "date": c.get("price_date") or "—"}


_TARGET_FILE = {"dlc": "dlc_job.json", "pytorchjob": "pytorchjob.yaml", "skypilot": "skypilot.yaml",
                "slurm": "slurm.sbatch"}


def _target_section(setup: Setup, lang: str, target: str) -> str:
    from .targets import SHARED, storage, submit_command

    nodes = int(setup.choice["nodes"])
    submit = submit_command(target, setup)
    zh = lang == "zh"
    program = {"megatron": "pretrain_gpt.py", "torchtitan": "torchtitan.train"}.get(setup.strategy["engine"],
                                                                                    "train.py")
    out = []
    if target != "ecs":
        out += ["", "## 提交" if zh else "## Submit", "",
                (f"`{_TARGET_FILE[target]}` 描述同一作业（{nodes} 个节点，每节点 {setup.choice['gpus_per_node']} 张 GPU，"
                 f"同一 {program} 命令）。" if zh else
                 f"`{_TARGET_FILE[target]}` describes the same job ({nodes} node(s), "
                 f"{setup.choice['gpus_per_node']} GPU(s) per node, the same {program} command)."),
                "", "```sh", submit, "```"]
        if target in ("dlc", "pytorchjob"):
            out += ["", (f"先把本目录复制到共享存储的 `{SHARED}/<作业名>/`（容器内路径）。" if zh else
                         f"First copy this directory to `{SHARED}/<job name>/` on the shared storage (the path inside "
                         "the container).")]
        if target == "dlc":
            out += ["", ("提交前在 dlc_job.json 中加入 \"WorkspaceId\"，并把 DataSources 的 Uri 换成你的 OSS/NAS/CPFS 地址"
                         "（或用 --storage 生成）。" if zh else
                         "Before submitting, add \"WorkspaceId\" to dlc_job.json and point the DataSources Uri at your "
                         "OSS / NAS / CPFS (or generate with --storage).")]
        if target == "skypilot":
            out += ["", ("注意：SkyPilot 不能直接创建阿里云 ECS 实例；可在 ACK 上运行（`cloud: kubernetes`），或使用 "
                         "--target ecs / dlc / pytorchjob。" if zh else
                         "Note: SkyPilot does not reach Alibaba ECS directly; run it on ACK (`cloud: kubernetes`) or "
                         "another cloud, or use --target ecs / dlc / pytorchjob.")]
    if nodes > 1:
        out += ["", "## 共享存储" if zh else "## Shared storage", "",
                (f"多节点检查点必须写到所有节点都能访问的存储：{storage(target, lang)}。" if zh else
                 f"Multi-node checkpoints must be written where every node sees them: {storage(target, lang)}.")]
    return "\n".join(out) + ("\n" if out else "")
