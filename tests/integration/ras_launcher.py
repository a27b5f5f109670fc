"""`ddplab launch` on this CPU machine described as a machine whose collective library has a RAS service
(the vendor table's, at the version given), so that `--ras` has a service to ask: the test points the
service's address at its fake (tests/ras_fake.py). Everything else is the real command: torchrun's
parser, elastic, the watcher, gloo ranks.

    python tests/integration/ras_launcher.py VERSION [ddplab launch arguments...]
"""

import dataclasses
import sys

from ddplab.commands import launch
from ddplab.job.run import run
from ddplab.platform import VENDORS, detect


def main(argv: list[str]) -> int:
    version, launch_argv = argv[0], argv[1:]
    vendor = next(v for v in VENDORS.values() if v.ras)
    machine = dataclasses.replace(detect(with_memory=False), device_type=vendor.device_type,
                                  collective_library=vendor.collective_library, collective_loaded_version=version)
    report = run(launch.parse(launch_argv), print, platform=machine)
    return report.verdict.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
