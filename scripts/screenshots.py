"""Regenerate the report screenshots under docs/ from committed report JSONs (no run needed, no GPU).

    python scripts/screenshots.py            # every screenshot, the first screen (1400 x 900) of each page
    python scripts/screenshots.py --full     # the whole pages instead

Each page is rendered by this checkout's report/page.py (write_page, as `ddplab report` does: a `launch` report also
gets its trace-event file) into a temporary directory, opened in headless Chromium (Debian's, as the browser
tests use: scripts/setup-browser.sh) and photographed. The first screen is what the page is judged on (issue 21):
the verdict, the findings and the key figures must be there.

Sources, in order of preference where there are two: a one-GPU full-profile report in
docs/results/1xh200-full/report.json (scripts/device/one_gpu_full.sh writes it on a one-GPU machine), else the
one-GPU full profile of 2026-12-01 (docs/results/1xh200-one-judge: it FAILED in its sweep, so the first screen shows
a failure), else the one-GPU lab of the first H200 session (docs/results/1xh200-foundation: env and train only).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

VIEWPORT = {"width": 1400, "height": 900}
# (screenshot, source report.json candidates in order of preference, what it shows)
SHOTS = [
    ("docs/report-quick-cpu.png", ["tests/fixtures/report-quick-cpu.json"], "`ddplab run` quick profile on CPU"),
    ("docs/report-1xh200.png", ["docs/results/1xh200-full/report.json",
                                "docs/results/1xh200-one-judge/full_profile_stock_sweep_failed.json",
                                "docs/results/1xh200-foundation/run_1xh200.json"], "`ddplab run` on one H200"),
    ("docs/report-full-2xh200.png", ["docs/results/2xh200-final-round/round_b/full.json"],
     "`ddplab run --profile full` on 2x H200"),
    ("docs/report-launch-hang.png", ["tests/fixtures/launch-hang/report.json"],
     "`ddplab launch` of examples/user_deadlock.py on CPU: a hang"),
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        sys.exit("screenshots: chromium not found (bash scripts/setup-browser.sh installs Debian's)")
    return found


def render(source: Path, into: Path) -> Path:
    """The page of ``source`` in ``into``, with the files beside the report (flight records) copied along."""
    from ddplab.report.page import write_page
    from ddplab.reading.catalog import read_report

    report = read_report(str(source))
    if source.parent.name == "launch-hang":  # a job directory: its ranks/ travel with it
        shutil.copytree(source.parent, into / "job")
        source = into / "job" / source.name
    page = into / (source.stem + ".html")
    write_page(report, page, base_dir=source.parent)
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the whole page, not only the first screen")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT)
        for i, (shot, candidates, what) in enumerate(SHOTS):
            source = next((ROOT / c for c in candidates if (ROOT / c).is_file()), None)
            if source is None:
                print(f"skipped {shot}: none of {candidates} exists")
                continue
            into = Path(tmp) / str(i)
            into.mkdir()
            page.goto(render(source, into).as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(ROOT / shot), full_page=args.full)
            print(f"wrote {shot}: {what}, from {source.relative_to(ROOT)}")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
