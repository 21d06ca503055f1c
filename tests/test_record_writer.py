"""The record writer: lines queued on the event loop reach the file in order, all of them, by close."""

import asyncio
import json
import threading

from lalmeval.results.store import JsonlWriter


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lines_queued_on_the_event_loop_are_written_in_order_within_moments_without_a_close(tmp_path):
    path = tmp_path / "records.jsonl"

    async def main() -> list:
        writer = JsonlWriter(path)
        for index in range(500):
            writer.write({"id": index})
        for _ in range(200):  # the lines are handed over together soon after the first, and written: no close needed
            await asyncio.sleep(0.005)
            if len(path.read_text().splitlines()) == 500:
                break
        seen = _lines(path)
        writer.close()
        return seen

    assert [line["id"] for line in asyncio.run(main())] == list(range(500))


def test_close_writes_every_line_queued_before_it_even_without_a_turn_of_the_loop(tmp_path):
    path = tmp_path / "records.jsonl"

    async def main() -> None:
        first, second = JsonlWriter(path), JsonlWriter(tmp_path / "other.jsonl")
        for index in range(300):
            (first if index % 2 else second).write({"id": index})
        first.close()   # on the loop, before it ever turned: the lines still reach the file
        second.close()

    asyncio.run(main())
    assert [line["id"] for line in _lines(path)] == list(range(1, 300, 2))
    assert [line["id"] for line in _lines(tmp_path / "other.jsonl")] == list(range(0, 300, 2))


def test_lines_written_from_a_thread_without_a_loop_are_written_too(tmp_path):
    path = tmp_path / "records.jsonl"
    writer = JsonlWriter(path)
    workers = [threading.Thread(target=lambda k=k: [writer.write({"id": k * 100 + i}) for i in range(100)]) for k in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    writer.close()
    assert sorted(line["id"] for line in _lines(path)) == list(range(400))
