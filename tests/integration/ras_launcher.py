"""`ddplab launch` on this CPU machine described as a machine whose collective library has a RAS service
(the vendor table's, at the version given), so that `--ras` has a service to ask: the test points the
service's address at its fake (tests/ras_fake.py). Everything else is the real command: torchrun's
parser, elastic, the watcher, gloo ranks.

    python tests/integration/ras_launcher.py VERSION [ddplab launch arguments...]
"""

import dataclasses
import sys

from ddplab.commands import launch
from ddplab.job import run as job
from ddplab.platform import VENDORS, detect
from ddplab.records import make_report
from ddplab.job.session import Observer


def main(argv: list[str]) -> int:
    version, launch_argv = argv[0], argv[1:]
    vendor = next(v for v in VENDORS.values() if v.ras)
    machine = dataclasses.replace(detect(with_memory=False), device_type=vendor.device_type,
                                  collective_library=vendor.collective_library, collective_loaded_version=version)
    config = launch.parse(launch_argv)
    report = make_report(job, config, job.run(config, Observer(_Printer()), platform=machine))
    job.write_reports(report)
    return report.verdict.exit_code


class _Printer:
    """What the test reads from stdout: the lines the command prints (the job directory first)."""

    def print(self, text, **kwargs):
        print(text, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
