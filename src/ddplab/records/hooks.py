"""What a results record may offer beyond its data, declared (``typing.Protocol``) rather than looked up by name:
the HTML report, `compare`, the lab and the verdict test a record with ``isinstance`` against these, so a record
that offers one says so by having its method, and a typo in its name is a type error, not a silent miss.

    Drawn         figures(stage) -> the charts and tables report.html draws (records/figures.py)
    HasTimedRows  timed_rows(config) -> the rows `ddplab compare` lines up (records/compare.py)
    StartsRuns    run_ids() -> the run ids it started (the lab's leftover check looks for their processes)
    Staged        stage_verdicts() -> each stage's verdict (a lab's, a check's: compared stage by stage)
    InSession     session: the SessionRecord of the ranks it ran (its run id, its platform)
    OnMachine     platform: the machine it ran on, kept beside its results (written at the report's top)
    Interruptible interrupted: whether a stop signal cut it short

And what makes a report (``core.make_report``) may ask of the module it is given, a kind (measurements/__init__.py):

    Kind          NAME, SUMMARY, Config, Record, run(config, observer), checks(record), summary(record)
    ChoosesAtRun  config_as_run(config, record) -> the config with what was chosen when it ran (sweep: -R for the
                  device; the lab: its stages' command lines; a launch: the rendezvous it chose)
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, runtime_checkable


@runtime_checkable
class Drawn(Protocol):
    def figures(self, stage: str) -> list: ...


@runtime_checkable
class HasTimedRows(Protocol):
    def timed_rows(self, config: Any) -> list: ...


@runtime_checkable
class StartsRuns(Protocol):
    def run_ids(self) -> Iterable[str]: ...


@runtime_checkable
class Staged(Protocol):
    def stage_verdicts(self) -> dict: ...


@runtime_checkable
class InSession(Protocol):
    session: Any


@runtime_checkable
class OnMachine(Protocol):
    platform: Any


@runtime_checkable
class Interruptible(Protocol):
    interrupted: bool


@runtime_checkable
class Kind(Protocol):
    NAME: str
    SUMMARY: str
    Config: type
    Record: type

    def run(self, config: Any, observer: Any = None) -> Any: ...

    def checks(self, record: Any) -> list: ...

    def summary(self, record: Any) -> str: ...


@runtime_checkable
class ChoosesAtRun(Protocol):
    def config_as_run(self, config: Any, record: Any) -> Any: ...
