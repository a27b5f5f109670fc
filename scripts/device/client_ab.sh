#!/usr/bin/env bash
# One H200: does the MPS daemon's first client change what the ranks measure after it? `ddplab storm --iters 1000`
# (the check's storm: 2 ranks share the GPU through gloo under a private MPS daemon), alternating the torch client
# (vendors.py without sharing_daemon_client, as before 97d133d: edited in this copy of the tree, then restored)
# and the driver client (platform/cuda_client.py), 4 each.
set -u
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . > /tmp/pip.log 2>&1 || echo "pip failed"
rm -rf /tmp/ab; mkdir -p /tmp/ab; cp src/ddplab/platform/vendors.py /tmp/ab/vendors.py
storm() {  # storm CLIENT N
  if [ "$1" = torch ]; then sed -i '/sharing_daemon_client="cuda_client.py",/d' src/ddplab/platform/vendors.py
  else cp /tmp/ab/vendors.py src/ddplab/platform/vendors.py; fi
  python3 -m ddplab storm --iters 1000 --run-dir "/tmp/ab/$1$2" --json "/tmp/ab/$1$2.json" > "/tmp/ab/$1$2.log" 2>&1
  python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['results']
events = [e for e in (r.get('sharing_daemon') or {}).get('events', []) if 'client' in e]
print(sys.argv[1], 'mean', r.get('mean_us'), 'p50', (r.get('per_op_us') or {}).get('p50'), 'duration', r.get('duration_s'), events)
" "/tmp/ab/$1$2.json"
}
for n in 1 2 3 4; do storm torch $n; storm driver $n; done
cp /tmp/ab/vendors.py src/ddplab/platform/vendors.py
ps -eo pid,ppid,etimes,args | grep -E "ddplab|nvidia-cuda-mps" | grep -v -E "grep|defunct" || echo "nothing left running"
mkdir -p "$OUT/ab"; cp /tmp/ab/*.json "$OUT/ab/"; tail -3 /tmp/ab/torch1.log
