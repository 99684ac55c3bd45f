#!/usr/bin/env python3
"""Hugging Face tokenizers on the text engine/bench/bench_tokenizer.cpp encodes, for the ratio.

Same document (every golden text, numbered copies), same cases: a whole document with a fresh
tokenizer (cold word cache) and a warm one, prompt by prompt, decode. One thread (RAYON_NUM_THREADS=1).
Run with tools/tokenizers/.venv/bin/python (see make_tokenizer_goldens.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def rate(seconds: float, body) -> float:
    start = time.perf_counter()
    tokens = 0
    while True:
        tokens += body()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return tokens / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizers", nargs="*", default=["qwen2-large", "llama-large"])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    goldens = REPO / "tests" / "golden" / "data" / "tokenizers"
    print(f"{'tokenizer':12} {'doc bytes':>10} {'tokens':>8} | {'doc cold tok/s':>14} {'doc warm tok/s':>14} "
          f"{'prompts tok/s':>14} | {'decode tok/s':>12}")
    for name in args.tokenizers:
        golden = json.loads((goldens / name / "golden.json").read_text(encoding="utf-8"))
        path = str(REPO / golden["tokenizer_dir"] / "tokenizer.json")
        prompts = [f"#{r} {c['text']}" for r in range(args.repeat) for c in golden["cases"]]
        document = "".join(p + "\n" for p in prompts)
        warm = Tokenizer.from_file(path)
        ids = warm.encode(document, add_special_tokens=False).ids
        cold_tokens, cold_seconds = 0, 0.0
        while cold_seconds < args.seconds:
            t = Tokenizer.from_file(path)
            start = time.perf_counter()
            cold_tokens += len(t.encode(document, add_special_tokens=False).ids)
            cold_seconds += time.perf_counter() - start
        doc = rate(args.seconds, lambda: len(warm.encode(document, add_special_tokens=False).ids))
        per_prompt = rate(args.seconds, lambda: sum(len(warm.encode(p, add_special_tokens=True).ids) for p in prompts))
        decode = rate(args.seconds, lambda: len(ids) if warm.decode(ids, skip_special_tokens=False) else 0)
        print(f"{name:12} {len(document.encode()):>10} {len(ids):>8} | {cold_tokens / cold_seconds:>14.0f} {doc:>14.0f} "
              f"{per_prompt:>14.0f} | {decode:>12.0f}")


if __name__ == "__main__":
    main()
