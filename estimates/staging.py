"""How long staging a served model onto /shared may take: what `pulumi up` waits for its Hub Job.

The download writes the model's weights onto the shared file system, whose aggregate throughput
bounds it (FSx for Lustre: TiB x MB/s per TiB; estimates.checkpoints.FileSystem); the Hub's own
rate is not known here, so the wait allows twice the file system's time, plus a margin for the
listing and the small files, and never less than the hour every staging Job had before.
"""

from __future__ import annotations

MIN_SECONDS = 3600
"""The fixed wait every Hub Job had: enough for the small repositories (tokenizers, 8B models)."""
MARGIN_SECONDS = 600


def hub_download_seconds(weights_bytes: float, mb_per_second: float) -> int:
    """The Hub Job's await for `weights_bytes` at the file system's `mb_per_second`."""
    write = weights_bytes / 1e6 / max(mb_per_second, 1)
    return max(MIN_SECONDS, int(2 * write) + MARGIN_SECONDS)
