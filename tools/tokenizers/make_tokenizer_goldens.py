#!/usr/bin/env python3
"""Tokenizers configured like Qwen2's and Mixtral's, and Hugging Face `tokenizers` goldens for them.

No checkpoint can be downloaded here, so the tokenizers are trained with the `tokenizers` library
on a corpus of our own (tools/tokenizers/corpus.py) and configured component for component as
the published tokenizer.json files are:

  qwen2   byte-level BPE: NFC, Split(Qwen2 regex, isolated) + ByteLevel(use_regex=false),
          ByteLevel decoder and post-processor, <|endoftext|> <|im_start|> <|im_end|> special,
          <think> </think> added but not special (Qwen3).
  llama   Metaspace BPE with byte fallback (Mixtral / Llama 2): Prepend("▁") + Replace(" ", "▁")
          normalizer, no pre-tokenizer, <unk> <s> </s> then <0x00>..<0xFF>, merges as "a b"
          strings, decoder Replace/ByteFallback/Fuse/Strip, TemplateProcessing "<s> $A".

Writes:
  assets/tokenizers/{qwen2,llama}/tokenizer.json     small (vocab <= 512: the tiny test model's)
  tests/golden/data/tokenizers/<name>/               golden.json (+ tokenizer.json and
                                                     tokenizer_config.json)
where <name> is each small asset, a larger version of each (a few thousand tokens, a few extra
added tokens with lstrip/rstrip/single_word/normalized flags), the newer Llama form (Metaspace
pre-tokenizer, prepend_scheme "first"), and small tokenizers that exercise the other supported
components (normalizers, Split behaviours, Digits, Whitespace, ignore_merges, unk fusing).

golden.json holds, for every text, HF's encode(text, add_special_tokens=True/False).ids and the
decode of the first with skip_special_tokens=True/False, and decodes of random id lists.

Run through tools/tokenizers/make_tokenizer_goldens.sh (pinned venv). Deterministic.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ASSETS = REPO / "assets" / "tokenizers"
GOLDEN = REPO / "tests" / "golden" / "data" / "tokenizers"

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPM = "\u2581"  # ▁


def train(tok: Tokenizer, vocab_size: int, limit_alphabet: int | None = None, **kw) -> Tokenizer:
    if limit_alphabet is not None:
        # The trainer breaks ties in character counts at the cut in hash order (a different
        # alphabet every run): choose the characters here, ties by code point, and hand them
        # over as the initial alphabet, which the trainer always keeps.
        kw["initial_alphabet"] = alphabet(tok, limit_alphabet, kw.get("initial_alphabet", []))
        limit_alphabet = len(kw["initial_alphabet"])
        kw["limit_alphabet"] = limit_alphabet
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, **kw)
    tok.train_from_iterator(corpus.training_corpus(), trainer=trainer)
    return tok


def alphabet(tok: Tokenizer, n: int, first: list[str]) -> list[str]:
    """The n most frequent characters of the training words (after the tokenizer's normalizer
    and pre-tokenizer), `first` always among them; ties by code point."""
    counts: dict[str, int] = {}
    for line in corpus.training_corpus():
        text = tok.normalizer.normalize_str(line) if tok.normalizer else line
        words = [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(text)] if tok.pre_tokenizer else [text]
        for w in words:
            for ch in w:
                counts[ch] = counts.get(ch, 0) + 1
    chosen = list(first)
    for ch, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(chosen) >= n:
            break
        if ch not in chosen:
            chosen.append(ch)
    return chosen


def reload(tok: Tokenizer) -> Tokenizer:
    return Tokenizer.from_str(tok.to_str())


# ---------------------------------------------------------------- qwen2 (byte-level BPE)

def qwen2(vocab_size: int, extra: bool) -> tuple[Tokenizer, dict]:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    added = 5 + (4 if extra else 0)
    train(tok, vocab_size - added, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")])
    if extra:
        tok.add_tokens([
            AddedToken("<tool>", special=False, normalized=False, lstrip=True),
            AddedToken("</tool>", special=False, normalized=False, rstrip=True),
            AddedToken("word", special=False, normalized=True, single_word=True),
            AddedToken("Ω", special=False, normalized=True),  # NFC of U+2126 OHM SIGN
        ])
    config = {
        "add_prefix_space": False,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    return reload(tok), config


# ---------------------------------------------------------------- llama (Metaspace BPE + bytes)

def llama(vocab_size: int, limit_alphabet: int, form: str, extra: bool) -> tuple[Tokenizer, dict]:
    """form: "legacy" (Mixtral / Llama 2: normalizer, no pre-tokenizer) or "metaspace" (normalizer
    null, Metaspace pre-tokenizer with prepend_scheme "first", Metaspace decoder)."""
    # Train on the normalised text split before runs of ▁, so pieces like "▁▁▁" and "▁the" are
    # learnt but no merge spans two words (sentencepiece's behaviour).
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.Sequence([normalizers.Prepend(SPM), normalizers.Replace(" ", SPM)])
    t.pre_tokenizer = pre_tokenizers.Split(Regex(SPM + "+[^" + SPM + "]*|[^" + SPM + "]+"), behavior="isolated")
    train(t, vocab_size - 3 - 256, limit_alphabet=limit_alphabet, initial_alphabet=[SPM])
    trained = json.loads(t.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for token, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if token not in vocab:
            vocab[token] = len(vocab)
    merges = [tuple(m) for m in trained["merges"]]

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if form == "legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPM), normalizers.Replace(" ", SPM)])
        tok.decoder = decoders.Sequence([decoders.Replace(SPM, " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPM, prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence([decoders.Metaspace(replacement=SPM, prepend_scheme="first", split=False),
                                         decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    if extra:
        tok.add_special_tokens([AddedToken("<tool>", special=True, normalized=False, lstrip=True, rstrip=True),
                                AddedToken("[INST]", special=True, normalized=False),
                                AddedToken("[/INST]", special=True, normalized=False)])
        tok.add_tokens([AddedToken("hi there", special=False, normalized=True),
                        AddedToken("word", special=False, normalized=False, single_word=True)])
    tok = reload(tok)
    if form == "legacy":
        # The published Mixtral / Llama 2 files list merges as "a b" strings (tokens hold no
        # spaces: the normaliser turned them into ▁).
        data = json.loads(tok.to_str())
        data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
        tok = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    config = {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "legacy": form == "legacy",
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": None,
        "spaces_between_special_tokens": False,
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
        "use_default_system_prompt": False,
    }
    return tok, config


# ---------------------------------------------------------------- other components

def misc_gpt2() -> tuple[Tokenizer, dict]:
    """NFKC, GPT-2 ByteLevel (regex on, prefix space), ignore_merges, Template with bos and eos."""
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    train(tok, 500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|bos|>", "<|eos|>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A <|eos|>", pair="<|bos|> $A <|eos|> $B:1 <|eos|>:1",
        special_tokens=[("<|bos|>", tok.token_to_id("<|bos|>")), ("<|eos|>", tok.token_to_id("<|eos|>"))])
    tok.add_special_tokens([AddedToken("<s>", special=True, normalized=True)])
    return reload(tok), {"bos_token": "<|bos|>", "eos_token": {"__type": "AddedToken", "content": "<|eos|>"}}


def misc_split() -> tuple[Tokenizer, dict]:
    """NFD + Lowercase + Strip + Replace(regex), Split behaviours, Digits, unk not fused,
    no decoder (tokens joined by spaces)."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFD(), normalizers.Lowercase(), normalizers.Strip(left=True, right=True),
        normalizers.Replace(Regex(r"\s+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[.,;:!?]"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="contiguous"),
        pre_tokenizers.Split(" ", behavior="removed"),
        pre_tokenizers.Digits(individual_digits=True),
    ])
    train(tok, 400, special_tokens=["[UNK]"], limit_alphabet=60)
    tok.add_special_tokens([AddedToken("<s>", special=True, normalized=False)])
    return reload(tok), {"bos_token": "<s>"}


def misc_whitespace() -> tuple[Tokenizer, dict]:
    """NFKD, Whitespace + inverted Split, fused unk, Digits contiguous, Strip decoder, Sequence
    post-processor."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.NFKD()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(),
        pre_tokenizers.Split(Regex(r"[aeiou]+"), behavior="isolated", invert=True),
        pre_tokenizers.Digits(individual_digits=False),
    ])
    tok.decoder = decoders.Sequence([decoders.Replace(Regex(r"^x+"), "X"), decoders.Strip("x", 1, 1)])
    train(tok, 400, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=50)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                      special_tokens=[("</s>", tok.token_to_id("</s>"))])])
    return reload(tok), {"eos_token": "</s>"}


def misc_metaspace() -> tuple[Tokenizer, dict]:
    """NFC, Metaspace split with prepend_scheme always, WhitespaceSplit, Metaspace decoder."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement=SPM, prepend_scheme="always", split=True)])
    tok.decoder = decoders.Metaspace(replacement=SPM, prepend_scheme="always", split=True)
    train(tok, 400, special_tokens=["<unk>"], limit_alphabet=70)
    tok.add_special_tokens([AddedToken("</s>", special=True, normalized=False)])
    return reload(tok), {"eos_token": "</s>", "bos_token": None}


# ---------------------------------------------------------------- goldens

def texts(full: bool) -> list[str]:
    """Every text for the Qwen2 and Llama forms; the hand-made ones for the other components."""
    base = corpus.HAND_TEXTS + corpus.SPECIAL_TEXTS
    return base + corpus.SENTENCES + corpus.random_texts(12, seed=7) if full else base


def goldens(tok: Tokenizer, tokenizer_dir: str, seed: int, full: bool) -> dict:
    cases = []
    for text in texts(full):
        with_special = tok.encode(text, add_special_tokens=True).ids
        cases.append({
            "text": text,
            "ids": tok.encode(text, add_special_tokens=False).ids,
            "ids_special": with_special,
            "decoded": tok.decode(with_special, skip_special_tokens=False),
            "decoded_skip": tok.decode(with_special, skip_special_tokens=True),
        })
    rng = random.Random(seed)
    n = tok.get_vocab_size(with_added_tokens=True)
    decode_cases = []
    for k in range(20 if full else 10):
        ids = [rng.randrange(n) for _ in range(rng.randint(1, 12))]
        if k == 0:
            ids.append(n + 5)  # not a token: HF skips it
        decode_cases.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                             "text_skip": tok.decode(ids, skip_special_tokens=True)})
    return {"tokenizer_dir": tokenizer_dir, "vocab_size": n, "cases": cases, "decode_cases": decode_cases}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


def dump_tokenizer(tok: Tokenizer, merges_as_strings: bool) -> str:
    """tokenizer.json with one vocab entry or merge a line (HF's pretty form spends four lines
    on a merge)."""
    data = json.loads(tok.to_str())
    model = data.pop("model")
    vocab, merges = model.pop("vocab"), model.pop("merges")
    text = json.dumps(data, ensure_ascii=False, indent=2)[:-2]
    head = json.dumps(model, ensure_ascii=False, indent=2)[:-2].replace("\n", "\n  ")
    v = ",\n".join(f"      {json.dumps(k, ensure_ascii=False)}: {i}" for k, i in vocab.items())
    if merges_as_strings:
        merges = [" ".join(x) for x in merges]
    m = ",\n".join(f"      {json.dumps(x, ensure_ascii=False)}" for x in merges)
    return (text + ',\n  "model": ' + head + ',\n    "vocab": {\n' + v + '\n    },\n    "merges": [\n'
            + m + "\n    ]\n  }\n}\n")


def dump_golden(g: dict) -> str:
    """One case a line: small, and a diff shows which case changed."""
    lines = ["{"]
    for key in ("tokenizer_dir", "vocab_size"):
        lines.append(f' {json.dumps(key)}: {json.dumps(g[key], ensure_ascii=False)},')
    for key in ("cases", "decode_cases"):
        lines.append(f' {json.dumps(key)}: [')
        rows = [json.dumps(c, ensure_ascii=False) for c in g[key]]
        lines.append(",\n".join("  " + r for r in rows))
        lines.append(" ]," if key == "cases" else " ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    made = {
        "qwen2": qwen2(512, extra=False),
        "llama": llama(512, limit_alphabet=120, form="legacy", extra=False),
        "qwen2-large": qwen2(3000, extra=True),
        "llama-large": llama(3000, limit_alphabet=400, form="legacy", extra=True),
        "llama-metaspace": llama(700, limit_alphabet=200, form="metaspace", extra=True),
        "misc-gpt2": misc_gpt2(),
        "misc-split": misc_split(),
        "misc-whitespace": misc_whitespace(),
        "misc-metaspace": misc_metaspace(),
    }
    for seed, (name, (tok, config)) in enumerate(made.items()):
        if name in ("qwen2", "llama"):
            assert tok.get_vocab_size(with_added_tokens=True) <= 512, name
            tok_dir = ASSETS / name
        else:
            tok_dir = GOLDEN / name
        write(tok_dir / "tokenizer.json", dump_tokenizer(tok, merges_as_strings=name in ("llama", "llama-large")))
        write(GOLDEN / name / "tokenizer_config.json", dump(config))
        # Goldens from the file as written, read back.
        written = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
        g = goldens(written, str(tok_dir.relative_to(REPO)), seed, full=not name.startswith("misc"))
        write(GOLDEN / name / "golden.json", dump_golden(g))
        print(f"{name}: vocab {g['vocab_size']}, {len(g['cases'])} texts, {len(g['decode_cases'])} decodes")


if __name__ == "__main__":
    main()
