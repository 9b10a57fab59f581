"""How the model runner's supervisor tells a runner still computing from a hung one: CPU
time read from /proc, with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from adapters.child_processes import cpu_seconds
from adapters.local_model.runner_client import RunnerProgress

SPIN = "while True: pass"


@pytest.fixture
def spinning() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", SPIN])
    yield process
    process.kill()
    process.wait()


def test_cpu_seconds_grows_while_a_process_computes_and_stops_when_it_is_stopped(spinning):
    first = cpu_seconds(spinning.pid)
    time.sleep(0.5)
    second = cpu_seconds(spinning.pid)
    assert first is not None and second is not None and second > first
    os.kill(spinning.pid, signal.SIGSTOP)
    time.sleep(0.05)
    stopped = cpu_seconds(spinning.pid)
    time.sleep(0.5)
    assert cpu_seconds(spinning.pid) == stopped


def test_cpu_seconds_of_a_process_that_is_gone_is_none():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert cpu_seconds(process.pid) is None


def test_a_computing_runner_gets_more_periods_then_counts_as_hung(spinning):
    progress = RunnerProgress(spinning.pid, period=0.4)
    for _ in range(RunnerProgress.MAX_BUSY_PERIODS):
        time.sleep(0.4)
        assert progress.still_working()
    time.sleep(0.4)
    assert not progress.still_working()


def test_a_stopped_runner_counts_as_hung_after_one_period(spinning):
    os.kill(spinning.pid, signal.SIGSTOP)
    progress = RunnerProgress(spinning.pid, period=0.4)
    time.sleep(0.4)
    assert not progress.still_working()


def test_a_token_gives_the_runner_its_periods_back(spinning):
    progress = RunnerProgress(spinning.pid, period=0.4)
    for _ in range(RunnerProgress.MAX_BUSY_PERIODS):
        time.sleep(0.4)
        assert progress.still_working()
    progress.reset()
    time.sleep(0.4)
    assert progress.still_working()
