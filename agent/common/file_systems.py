"""What file system a folder is on, from /proc/self/mountinfo: a network one (NETWORK) cannot give
the memory SQLite's WAL shares between processes (agent/store/db.py chooses its journal by it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

NETWORK = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "lustre", "gpfs", "afs", "beegfs"}
NETWORK |= {"fuse.glusterfs", "fuse.sshfs", "fuse.s3fs", "fuse.rclone", "fuse.gcsfuse"}


def file_system(folder: Path) -> str:
    """The type of the file system `folder` is on (from /proc/self/mountinfo), or '' when unknown."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
        target = os.path.realpath(folder)
    except OSError:
        return ""
    best, kind = "", ""
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split(" ")
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4]) if len(parts) > 4 else ""
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best) and rest:
            best, kind = point, rest.split(" ")[0]
    return kind
