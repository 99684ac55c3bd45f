#!/usr/bin/env python3
"""Many random texts through Hugging Face tokenizers, in the layout of the committed goldens.

    tools/tokenizers/.venv/bin/python tools/tokenizers/make_fuzz_goldens.py OUT_DIR [SEED] [N_TEXTS]
    SY_TOKENIZER_GOLDENS=OUT_DIR build/bin/test_tokenizer --gtest_filter='Goldens*'

For every tokenizer of tests/golden/data/tokenizers: N_TEXTS random texts (runs from many Unicode
blocks, whitespace of every kind, added tokens and near misses, numbers, cuts of the corpus)
and 300 random id lists. Too large to commit; for finding differences, not for CI.
"""

import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import corpus  # noqa: E402

OUT = Path(sys.argv[1])
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
blocks = [(0x20,0x7e),(0xa0,0x17f),(0x300,0x36f),(0x370,0x3ff),(0x400,0x4ff),(0x590,0x5ff),(0x600,0x6ff),(0x900,0x97f),(0xe00,0xe7f),(0x1100,0x11ff),(0x2000,0x206f),(0x3000,0x30ff),(0x4e00,0x4fff),(0xac00,0xacff),(0xfb00,0xfb4f),(0xff00,0xffef),(0x1f300,0x1f6ff),(0x1f900,0x1f9ff),(0x1d400,0x1d7ff),(0x10000,0x1007f)]
ws = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u0085", "\u2028", "\u200b", "\u200d", "\u180e", "\x0b", "\x0c"]
specials = ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool>", "</tool>", "word", "hi there", "[INST]", "Ω", "\u2126", "<0x41>", "▁", "'s", "'LL", "ﬁ", "İ", "Σ"]
pool = corpus.SENTENCES + corpus.HAND_TEXTS + corpus.SPECIAL_TEXTS
def rand_text():
    parts = []
    for _ in range(rng.randint(1, 8)):
        k = rng.random()
        if k < 0.3:
            b = rng.choice(blocks); parts.append("".join(chr(rng.randint(*b)) for _ in range(rng.randint(1, 6))))
        elif k < 0.5: parts.append(rng.choice(ws) * rng.randint(1, 5))
        elif k < 0.65: parts.append(rng.choice(specials))
        elif k < 0.8: parts.append(str(rng.randint(0, 10**rng.randint(1, 12))))
        else:
            s = rng.choice(pool); i = rng.randint(0, len(s)); parts.append(s[i:i+rng.randint(0, 30)])
    return "".join(parts)
texts = [rand_text() for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 2000)]
texts = [t for t in texts if not any(0xd800 <= ord(c) <= 0xdfff for c in t)]
G = REPO / 'tests' / 'golden' / 'data' / 'tokenizers'
out = {}
for d in sorted(G.iterdir()):
    g = json.loads((d / 'golden.json').read_text())
    tok = Tokenizer.from_file(str(REPO / g['tokenizer_dir'] / 'tokenizer.json'))
    cases = []
    for t in texts:
        a = tok.encode(t, add_special_tokens=True).ids
        cases.append({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids, "ids_special": a,
                      "decoded": tok.decode(a, skip_special_tokens=False), "decoded_skip": tok.decode(a, skip_special_tokens=True)})
    n = tok.get_vocab_size(True)
    dcs = []
    for _ in range(300):
        ids = [rng.randrange(n) for _ in range(rng.randint(1, 16))]
        dcs.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False), "text_skip": tok.decode(ids, skip_special_tokens=True)})
    out[d.name] = {"tokenizer_dir": g['tokenizer_dir'], "vocab_size": n, "cases": cases, "decode_cases": dcs}
    (OUT / d.name).mkdir(parents=True, exist_ok=True)
    (OUT / d.name / 'golden.json').write_text(json.dumps(out[d.name], ensure_ascii=False), encoding='utf-8')
    (OUT / d.name / 'tokenizer_config.json').write_text((d / 'tokenizer_config.json').read_text(encoding='utf-8'), encoding='utf-8')
print(f"{len(texts)} texts for {len(out)} tokenizers in {OUT}")
