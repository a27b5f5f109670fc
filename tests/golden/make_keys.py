"""Write keys.json: the key paths of each golden command's --json (run once, on the code to pin).

    PYTHONPATH=src python tests/golden/make_keys.py
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.golden.commands import COMMANDS, stable  # noqa: E402
from tests.golden.keys import key_paths  # noqa: E402


def main() -> None:
    out = Path(tempfile.mkdtemp(prefix="ddplab-golden-"))
    keys = {}
    for name, argv in COMMANDS.items():
        argv = [a.format(fixtures=HERE.parent / "fixtures", out=out) for a in argv]
        subprocess.run([sys.executable, "-m", "ddplab", *argv, "--json", str(out / f"{name}.json")], cwd=out,
                       env=dict(os.environ), capture_output=True, timeout=300)
        keys[name] = sorted(stable(key_paths(json.loads((out / f"{name}.json").read_text())), name))
    (HERE / "keys.json").write_text(json.dumps(keys, indent=1) + "\n")
    print(f"wrote {HERE / 'keys.json'} ({', '.join(f'{k}: {len(v)}' for k, v in keys.items())})")


if __name__ == "__main__":
    main()
