#!/usr/bin/env bash
# NCCL 2.30.7 onto the device machine in six calls (../shared/reference/measured.md, "How NCCL 2.30.7 was loaded"):
# each call carries one .nccl/partN (xz of libnccl.so.2, split at 34 MB: six parts beside the 25 MB tree) and stashes it in /tmp/nccl, which the
# machine keeps while it stays warm; the last call joins and decompresses them and checks the sha256 in .nccl/sha.
#   bash scripts/device/nccl_carry.sh stash          # whatever .nccl/part* this call carried
#   bash scripts/device/nccl_carry.sh assemble       # -> /tmp/nccl/libnccl.so.2, or exit 1
set -eu
mkdir -p /tmp/nccl
case "$1" in
stash)
  cp .nccl/part* /tmp/nccl/ && ls -l /tmp/nccl
  ;;
assemble)
  python3 - <<'PY'
import glob, hashlib, lzma, pathlib
parts = sorted(glob.glob("/tmp/nccl/part*"))
data = lzma.decompress(b"".join(pathlib.Path(p).read_bytes() for p in parts))
want = pathlib.Path(".nccl/sha").read_text().split()[0]
got = hashlib.sha256(data).hexdigest()
print(f"{len(parts)} parts, {len(data)} bytes, sha256 {'matches' if got == want else 'DIFFERS: ' + got}")
if got != want:
    raise SystemExit(1)
pathlib.Path("/tmp/nccl/libnccl.so.2").write_bytes(data)
PY
  ;;
esac
