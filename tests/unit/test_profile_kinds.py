"""`ddplab run --only`: the stage kinds a profile has are the same on every machine (profiles.kinds reads them from
a host-only machine), and a kind the profile lacks, or a value that is not a tuple of kinds, is refused (exit 2)
before anything starts."""

from pathlib import Path

import pytest

from ddplab.lab import profiles
from ddplab.errors import UsageError
from ddplab.lab.run import RunConfig
from ddplab.platform import describe
from tests.unit import fakes

MACHINES = {"cpu": fakes.cpu_only(), "1 gpu": fakes.nvidia(1, loaded="2.28.9"),
            "2 gpus with a sharing daemon": fakes.nvidia(2, loaded="2.30.7", built="2.30.7", mps_control=True)}


@pytest.mark.parametrize("profile", ["quick", "full", "soak"])
@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_a_profile_has_the_same_stage_kinds_on_every_machine(profile, machine):
    plan = profiles.stages(profile, 2, profiles.Machine.of(describe(MACHINES[machine]), "auto"), Path("/nowhere"),
                           60.0)
    assert tuple(dict.fromkeys(s.measurement for s in plan)) == profiles.kinds(profile)


def test_the_kinds_are_the_measurements_the_lab_runs():
    assert profiles.kinds("full") == ("train", "storm", "sweep", "ceiling", "contention", "drill")
    assert profiles.kinds("soak") == ("storm", "sweep")


def test_only_keeps_the_profile_s_kinds_and_refuses_the_others():
    assert RunConfig(only=("sweep", "drill")).only == ("sweep", "drill")
    with pytest.raises(UsageError) as err:
        RunConfig(profile="soak", only=("drill",))
    assert err.value.exit_code == 2
    assert "--only drill: the soak profile's stages are of the kinds storm, sweep" in err.value.message
    with pytest.raises(UsageError):
        RunConfig(only="sweep")  # a string, not a tuple of kinds: "sweep" in "sweep" would be a substring test
