"""A dataset's feed wakes as many idle workers as a read brings units, never loses a unit to a cancelled worker."""

import asyncio
import random
import threading

from lalmeval.inference.feed import READ_AHEAD, SampleFeed
from lalmeval.results.records import Sample


def samples(count):
    return [Sample(id=f"s{i}", reference="r") for i in range(count)]


def test_a_read_wakes_only_as_many_idle_workers_as_it_brings_units():
    """A hundred idle workers per pass, one read of READ_AHEAD samples: READ_AHEAD workers of the plain pass and
    twice that of the pass that asks twice wake; the others sleep on."""
    release = threading.Event()

    def source():
        yield from samples(READ_AHEAD)
        release.wait(10)  # the next read waits here: no end of data wakes everyone meanwhile

    async def worker(reader, got, hold):
        unit = await reader.get()
        if unit is not None:
            got.append(unit)
            await hold.wait()

    async def scenario():
        feed = SampleFeed(source)
        once, twice = feed.reader(), feed.reader(repeats=2)
        hold, got_once, got_twice = asyncio.Event(), [], []
        tasks = [asyncio.ensure_future(worker(once, got_once, hold)) for _ in range(100)]
        tasks += [asyncio.ensure_future(worker(twice, got_twice, hold)) for _ in range(100)]
        await asyncio.sleep(0)
        feed.start()
        for _ in range(200):
            await asyncio.sleep(0.005)
            if len(got_once) == READ_AHEAD and len(got_twice) == 2 * READ_AHEAD:
                break
        still_waiting = [sum(not turn.done() for turn in reader._waiting) for reader in (once, twice)]
        release.set()
        hold.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return got_once, got_twice, still_waiting

    got_once, got_twice, still_waiting = asyncio.run(scenario())
    assert sorted(s.id for s, _ in got_once) == sorted(f"s{i}" for i in range(READ_AHEAD))
    assert sorted((s.id, r) for s, r in got_twice) == sorted((f"s{i}", r) for i in range(READ_AHEAD) for r in (0, 1))
    assert still_waiting == [100 - READ_AHEAD, 100 - 2 * READ_AHEAD]


def test_a_worker_cancelled_after_it_was_woken_hands_its_turn_to_the_next():
    release = threading.Event()

    def source():
        release.wait(10)
        yield from samples(1)

    async def scenario():
        feed = SampleFeed(source)
        reader = feed.reader()
        feed.start()
        first, second = asyncio.ensure_future(reader.get()), asyncio.ensure_future(reader.get())
        await asyncio.sleep(0.01)
        second_turn = reader._waiting[1]
        reader.wake(1)   # the first is picked, and cancelled before it runs
        first.cancel()
        await asyncio.sleep(0.01)
        handed_on = second_turn.done()
        release.set()
        unit = await asyncio.wait_for(second, 10)
        return handed_on, unit, first.cancelled()

    handed_on, unit, first_cancelled = asyncio.run(scenario())
    assert first_cancelled and handed_on
    assert unit[0].id == "s0"


def test_every_unit_is_taken_once_while_workers_come_and_go():
    """Workers of two passes take units at random speeds, some cancelled while they wait: every sample reaches each
    pass once (repeats included), and the survivors end when the data does."""
    rng = random.Random(7)

    async def worker(reader, got):
        while (unit := await reader.get()) is not None:
            got.append((unit[0].id, unit[1]))
            await asyncio.sleep(rng.choice((0, 0, 0.0005)))

    async def scenario():
        feed = SampleFeed(lambda: iter(samples(500)))
        plain, repeated = feed.reader(), feed.reader(repeats=3)
        got_plain, got_repeated = [], []
        tasks = [asyncio.ensure_future(worker(plain, got_plain)) for _ in range(40)]
        tasks += [asyncio.ensure_future(worker(repeated, got_repeated)) for _ in range(40)]
        feed.start()
        doomed = rng.sample(tasks[1:40], 15) + rng.sample(tasks[41:], 15)   # one worker of each pass survives
        for task in doomed:
            await asyncio.sleep(0.001)
            task.cancel()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        return got_plain, got_repeated

    got_plain, got_repeated = asyncio.run(scenario())
    assert sorted(got_plain) == sorted((f"s{i}", 0) for i in range(500))
    assert sorted(got_repeated) == sorted((f"s{i}", r) for i in range(500) for r in range(3))
