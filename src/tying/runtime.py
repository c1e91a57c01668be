"""Process settings for the compute jobs (training, lens): torch's threads and a heap that keeps freed memory.

glibc hands every freed block above its mmap threshold (128 KiB, adjusted upwards as blocks are freed)
back to the kernel and trims the heap's free top, so the step's large tensors (at the default size the
(1024, 4096) logits, their log-softmax and gradients, 16 MiB each) come back as fresh pages that the
kernel faults in and zeroes on every step: about 15,000 page faults and a fifth of a training step's
CPU time. Fixed thresholds keep such blocks in the heap for the next step. Numbers are unchanged; only
where the memory comes from differs.
"""

import ctypes

import torch

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value: blocks up to 32 MiB come from the heap
TRIM_THRESHOLD = 1 << 30  # return the heap's free top to the kernel only beyond 1 GiB


def configure(threads):
    """Use `threads` CPU threads and keep freed memory in the heap (glibc; elsewhere a no-op)."""
    torch.set_num_threads(threads)
    keep_freed_memory()


def keep_freed_memory():
    """Raise glibc's mmap and trim thresholds; returns False where the C library has no mallopt."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the C library the process runs on
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def resolve_device(name):
    """A config device name as a torch device string: "auto" is CUDA when present, else CPU."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name
