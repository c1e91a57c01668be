"""What profiles/slurm asks of the Slurm it submits to."""

import re
import subprocess


def accounting_off(config_text: str) -> bool:
    """Whether `scontrol show config` text says slurmctld keeps no job accounting (no slurmdbd)."""
    for line in config_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() in ("accounting_storage/none", "(null)", "")
    return False


def status_command() -> str | None:
    """The slurm plugin's status command for this machine's Slurm: "squeue" where it keeps no accounting
    (sacct then only says "accounting storage is disabled", and a run waits on it without end), else None,
    the plugin's own choice (sacct). None too where scontrol is missing or does not answer in 5 s."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return "squeue" if out.returncode == 0 and accounting_off(out.stdout) else None


def node_cpus(partition: str | None = None) -> int | None:
    """The CPUs of the smallest node in `partition`, else in the default partition (sinfo's "%c": "2", or
    "32+" for the fewest of several sizes), or None where sinfo is missing, fails, takes over 5 s or
    lists no such partition. A job or group that asks for more than every node has would wait in the
    queue for good (reason PartitionConfig)."""
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P %c"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return fewest_cpus(out.stdout, partition) if out.returncode == 0 else None


def fewest_cpus(sinfo_text: str, partition: str | None = None) -> int | None:
    """The fewest CPUs in `sinfo -h -o "%P %c"` text for `partition` (None: the one marked default, "*")."""
    counts = [
        int(m[3])
        for m in re.finditer(r"^(\S+?)(\*?)\s+(\d+)", sinfo_text, re.M)
        if (m[1] == partition if partition else m[2] == "*")
    ]
    return min(counts) if counts else None
