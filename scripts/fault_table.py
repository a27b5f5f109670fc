"""The fault table, run for real: every fault in every training code it applies to, through `ddplab launch`, at
several rank counts, repeated.

    python scripts/fault_table.py [--ranks 2,3,4] [--repeat 3] [--cases all] [--codes all] [--hang-timeout 5]
                                  [--out docs/results/fault-table]

Writes <out>/runs.json (every run, judged) and <out>/table.md (the table in docs/fault-table.md), and prints the
table. Cases and what is right: src/ddplab/drills/fault_table.py. Exit 1 if any run was not right.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ddplab.drills import fault_table
from ddplab.basics.files import write_text_atomic


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="2,3,4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default="all", help=f"all, or some of {', '.join(fault_table.BY_NAME)}")
    parser.add_argument("--codes", default="all", help=f"all, or some of {', '.join(fault_table.CODES)}")
    parser.add_argument("--hang-timeout", type=float, default=5.0)
    parser.add_argument("--out", default="docs/results/fault-table")
    args = parser.parse_args()
    cases = fault_table.CASES if args.cases == "all" else [fault_table.BY_NAME[c] for c in args.cases.split(",")]
    out = Path(args.out)
    work = out / "jobs"
    runs = []
    codes = set(fault_table.CODES) if args.codes == "all" else set(args.codes.split(","))
    for repeat in range(args.repeat):
        for nproc in (int(n) for n in args.ranks.split(",")):
            for case in cases:
                for code in (c for c in case.codes if c in codes):
                    run = fault_table.run_case(case, nproc, work / f"r{repeat}", args.hang_timeout, code)
                    runs.append(run)
                    verdict = "right" if run.right else "WRONG: " + "; ".join(run.failures)
                    print(f"{time.strftime('%H:%M:%S')} {case.name} [{code}] x{nproc} #{repeat}: {verdict} "
                          f"({run.wall_s} s)", flush=True)
                    # after every run: a table cut short (hours of runs) keeps every run it made
                    write_text_atomic(out / "runs.json", json.dumps(fault_table.to_json(runs), indent=1),
                                      make_parents=True)
    text = fault_table.table(runs)
    write_text_atomic(out / "table.md", text + "\n")
    print(text)
    return 0 if all(r.right for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
