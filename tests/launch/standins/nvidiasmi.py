"""Stand-in for nvidia-smi: `-L` lists the GPUs this pod was given (/dev/nvidiaN), the ECC
query prints 0 uncorrected errors per GPU, the driver query the node's driver version (the
NVIDIA module's /sys/module/nvidia/version)."""

from __future__ import annotations

import glob
import sys
from pathlib import Path

gpus = sorted(int(d[len("/dev/nvidia") :]) for d in glob.glob("/dev/nvidia*") if d[len("/dev/nvidia") :].isdigit())
if "-L" in sys.argv:
    for i in gpus:
        print(f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-00000000000{i})")
elif any(a.startswith("--query-gpu=ecc.errors.uncorrected") for a in sys.argv):
    for _ in gpus:
        print("0")
elif "--query-gpu=driver_version" in sys.argv:
    try:
        driver = Path("/sys/module/nvidia/version").read_text().strip()
    except OSError:
        print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
        sys.exit(9)
    for _ in gpus:
        print(driver)
else:
    print("nvidia-smi stand-in: unsupported arguments", sys.argv[1:], file=sys.stderr)
    sys.exit(2)
