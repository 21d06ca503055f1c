"""Synthesize the demo_commands speech dataset with espeak-ng and sox.

    apt-get install espeak-ng sox && python private_datasets/demo_commands/make_demo_commands.py

Writes audio/NNN.flac (16 kHz mono 16-bit) and demo_commands.jsonl. Sentences are drawn from
templates with a fixed seed; voices, speaking rates and pitch vary per utterance, and some
clips get background noise, so the demo recognizer makes a realistic number of mistakes.
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNT = 40
ROOMS = ["kitchen", "bedroom", "living room", "bathroom", "garage", "office"]
NUMBERS = ["one", "two", "three", "five", "ten", "fifteen", "twenty", "thirty", "forty five"]
VOICES = ["en-us", "en", "en-gb-scotland", "en+m3", "en+f3", "en-us+f2", "en+m7", "en-029", "en-gb-x-rp"]


def sentence(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return f"{rng.choice(['turn on', 'turn off', 'switch on', 'dim'])} the {rng.choice(ROOMS)} {rng.choice(['light', 'lamp', 'fan', 'heater'])}"
    if kind == 1:
        return f"set a {rng.choice(['timer', 'alarm'])} for {rng.choice(NUMBERS)} {rng.choice(['minutes', 'seconds', 'hours'])}"
    if kind == 2:
        return f"{rng.choice(['call', 'text', 'email'])} {rng.choice(['mom', 'dad', 'the office', 'doctor brown', 'my sister'])}"
    if kind == 3:
        where = f" in the {rng.choice(ROOMS)}" if rng.random() < 0.5 else ""
        return f"play {rng.choice(['some jazz', 'the news', 'the radio', 'my playlist'])}{where}"
    return f"what is the weather {rng.choice(['today', 'tomorrow', 'this weekend'])}"


def synthesize(text: str, voice: str, rate: int, pitch: int, noise: float, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(rate), "-p", str(pitch), "-w", str(raw), text], check=True)
        effects = ["rate", "16000", "channels", "1", "pad", "0.2", "0.2"]
        if noise:
            noisy = Path(tmp) / "noise.wav"
            seconds = float(subprocess.run(["soxi", "-D", str(raw)], capture_output=True, text=True, check=True).stdout) + 0.4
            subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", str(noisy), "synth", f"{seconds:.2f}", "pinknoise", "vol", str(noise)], check=True)
            staged = Path(tmp) / "staged.wav"
            subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", str(staged), *effects[4:]], check=True)
            subprocess.run(["sox", "-m", str(staged), str(noisy), "-b", "16", str(out)], check=True)
        else:
            subprocess.run(["sox", str(raw), "-b", "16", str(out), *effects], check=True)


def main() -> None:
    rng = random.Random(20261122)
    (HERE / "audio").mkdir(exist_ok=True)
    rows = []
    for index in range(COUNT):
        text = sentence(rng)
        voice, rate, pitch = rng.choice(VOICES), rng.randint(135, 185), rng.randint(30, 70)
        noise = rng.choice([0, 0, 0, 0.05, 0.12])
        name = f"audio/{index:03d}.flac"
        synthesize(text, voice, rate, pitch, noise, HERE / name)
        rows.append({"id": f"cmd{index:03d}", "audio": name, "reference": text, "voice": voice, "rate": rate, "noise": noise})
    with (HERE / "demo_commands.jsonl").open("w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    print(f"wrote {len(rows)} utterances to {HERE}")


if __name__ == "__main__":
    main()
