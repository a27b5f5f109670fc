#!/usr/bin/env bash
# 2x H200, round E (issue 9 §2-3, issue 14's shared device): NCCL 2.30.7 preloaded over torch's 2.28.9, as a user
# trying a newer NCCL would. The carried xz parts are joined and checked first.
#   RES=/tmp/r/e bash scripts/device/round_e.sh      (results packed into $OUT/shared_device.tgz, library-engine.tgz)
set -u
cat /tmp/nccl-parts/libnccl.part.0? > /tmp/nccl-parts/libnccl.so.2.xz
python3 - <<'PY'
import hashlib, lzma, pathlib
src = pathlib.Path("/tmp/nccl-parts/libnccl.so.2.xz")
want = {l.split()[1].rsplit("/", 1)[-1]: l.split()[0] for l in open("/tmp/nccl-parts/sums.txt")}
assert hashlib.sha256(src.read_bytes()).hexdigest() == want["libnccl.so.2.xz"], "parts do not join"
out = pathlib.Path("/tmp/nccl-2.30.7/libnccl.so.2"); out.parent.mkdir(exist_ok=True)
out.write_bytes(lzma.decompress(src.read_bytes()))
assert hashlib.sha256(out.read_bytes()).hexdigest() == want["libnccl.so.2"], "library does not match"
print("NCCL 2.30.7 ready:", out)
PY
export ITERS=2000
RES=${RES:-/tmp/ddplab-results}/shared PRELOAD=/tmp/nccl-2.30.7/libnccl.so.2 bash scripts/device/shared_device.sh
[ -d .whl ] && LD_PRELOAD=/tmp/nccl-2.30.7/libnccl.so.2 RES=${RES:-/tmp/ddplab-results}/library \
  bash scripts/device/library_engine_x2.sh shared summary
