"""Stand-in for nvidia-smi: `-L` lists the GPUs this pod was given (/dev/nvidiaN), and the ECC
query prints 0 uncorrected errors per GPU."""

from __future__ import annotations

import glob
import sys

gpus = sorted(int(d[len("/dev/nvidia") :]) for d in glob.glob("/dev/nvidia*") if d[len("/dev/nvidia") :].isdigit())
if "-L" in sys.argv:
    for i in gpus:
        print(f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-00000000000{i})")
elif any(a.startswith("--query-gpu=ecc.errors.uncorrected") for a in sys.argv):
    for _ in gpus:
        print("0")
else:
    print("nvidia-smi stand-in: unsupported arguments", sys.argv[1:], file=sys.stderr)
    sys.exit(2)
