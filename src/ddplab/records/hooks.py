"""What a results record may offer beyond its data, declared (``typing.Protocol``) rather than looked up by name, so
that a typo in a method's name is a type error, not a silent miss.

    Drawn         figures(stage) -> the charts and tables report.html draws
    HasTimedRows  timed_rows(config) -> the rows `ddplab compare` lines up
    StartsRuns    run_ids() -> the run ids it started (the lab's leftover check looks for their processes)
    Staged        stage_verdicts() -> each stage's verdict (compared stage by stage)
    InSession     session: the SessionRecord of the ranks it ran
    OnMachine     platform: the machine it ran on (written at the report's top)
    Interruptible interrupted: whether a stop signal cut it short

And what ``core.make_report`` may ask of a kind (measurements/__init__.py): ``Kind`` and ``ChoosesAtRun``.
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
