"""Training corpus and golden texts for the tokenizer goldens (all written for this project).

The corpus mixes scripts (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, CJK, Hangul),
emoji (with skin tones, ZWJ sequences and flags), code, numbers, whitespace runs, tabs and
newlines, so trained merges and byte fallback both show up in the goldens.
"""

from __future__ import annotations

import random

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A tokenizer splits text into pieces that a model has seen before.",
    "Mixture-of-experts models route every token to the top two of eight experts.",
    "We measured 1234 tokens per second on 2 cores, about 3.5x the baseline.",
    "Don't panic: it's only a test, and they're fine, we've checked, I'm sure you'll agree, he'd say.",
    "THE END. The end? the end!",
    "Le renard brun rapide saute par-dessus le chien paresseux, à côté de l'église.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein; Straße, Größe, Äpfel.",
    "El niño comió piña en la mañana del año nuevo.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
    "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "مرحبا بالعالم، هذا نص تجريبي باللغة العربية.",
    "השועל החום המהיר קופץ מעל הכלב העצלן.",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।",
    "नमस्ते दुनिया, यह एक परीक्षण वाक्य है।",
    "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "敏捷的棕色狐狸跳过了懒狗。",
    "你好，世界！这是一个测试句子，用来训练分词器。",
    "素早い茶色の狐が怠け者の犬を飛び越える。",
    "こんにちは世界、これはテストです。カタカナとひらがな。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘는다.",
    "안녕하세요 세계, 이것은 테스트 문장입니다.",
    "Emoji: 😀 😃 😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 🇯🇵 🇺🇸 ❤️ ✨ 🚀",
    "Family 👩‍👩‍👦 and a flag 🇩🇪 next to 🧑🏿‍💻 coding.",
    "def forward(self, x):\n    return self.proj(x) + self.bias\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "if __name__ == \"__main__\":\n    main()\n",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "    indented    with    spaces\t\tand\ttabs\n\n\nand blank lines\r\n",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159 2,718 -42 1e-9 0x1F",
    "Dates 2024-01-31, times 12:34:56, versions v1.2.3-rc4.",
    "e-mail: someone@example.com, url: https://example.org/path?q=1&r=2#frag",
    "Fancy quotes “like this” and ‘this’ — plus an ellipsis… and a € sign.",
    "Full-width ＡＢＣ１２３ and ligatures ﬁ ﬂ and superscripts x² y³.",
    "Combining: e\u0301 a\u0300 o\u0308 n\u0303 vs precomposed é à ö ñ.",
]

CODE = """
#include <vector>
// Sums a vector.
int sum(const std::vector<int>& v) {
  int s = 0;
  for (int x : v) s += x;
  return s;
}
class Router:
    def __init__(self, experts: int, top_k: int = 2) -> None:
        self.experts = experts
        self.top_k = top_k
"""


def training_corpus() -> list[str]:
    """A few hundred lines: every sentence several times, shuffled pairs, code."""
    rng = random.Random(20241125)
    lines: list[str] = []
    for _ in range(6):
        lines.extend(SENTENCES)
    for _ in range(200):
        a, b = rng.sample(SENTENCES, 2)
        lines.append(a + " " + b)
    lines.extend(CODE.splitlines(keepends=True) * 4)
    return lines


HAND_TEXTS = [
    "",
    " ",
    "  ",
    "          ",
    "\t",
    "\n",
    "\n\n\n",
    "\r\n",
    " \n \n ",
    "a",
    "Hello",
    " Hello",
    "Hello world",
    "Hello  world",
    "Hello                                  world   ",
    "hello\tworld\t\t\tagain",
    "line one\nline two\r\nline three\n\n",
    "trailing spaces   ",
    "   leading spaces",
    "Don't you think it's they're we'll I'd YOU'RE SHE'S",
    "12345678901234567890",
    "3.14159 + 2.71828 = 5.85987",
    "x=1;y=22;z=333",
    "Быстрая лиса",
    "  Съешь   ещё  ",
    "الثعلب البني",
    "नमस्ते दुनिया",
    "你好，世界！",
    "素早い茶色の狐",
    "빠른 갈색 여우",
    "สุนัขจิ้งจอก",
    "Mixed: Hello Привет 你好 مرحبا नमस्ते 🙂",
    "😀",
    "👨‍👩‍👧‍👦",
    "🏳️‍🌈🇫🇷🇯🇵",
    "👍🏽👍🏿 ok",
    "e\u0301t\u00e9",
    "Ａｂｃ１２３ ﬁne",
    "\u00a0non\u00a0breaking\u00a0spaces\u3000ideographic",
    "zero\u200bwidth\u200djoiner",
    "next\u0085line",
    "<0x41> is not a byte token in text",
    "▁ already has a metaspace",
    "def f(x):\n    return x  # comment\n",
    "\t\tif (a && b) { return c; }\n",
    "💩💩💩 unknown 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
    "ǅ ﬀ ẞ İstanbul ΣΊΣΥΦΟΣ",
    "Ωmega Å ℃ ⅷ ½",
]

# Texts with added tokens inside; the same list is used for every tokenizer (a token a
# tokenizer lacks is just text there).
SPECIAL_TEXTS = [
    "<s>",
    "<s>Hello</s>",
    "<s> Hello </s>",
    "Hello<s>world",
    "</s></s><s>",
    "<unk>",
    "<|endoftext|>",
    "<|im_start|>user\nHello there!<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<think></think>",
    "a<|im_end|>b<|endoftext|>c",
    "<|im_start|><|im_end|>",
    "<|im_start",
    "<tool>  call  </tool>  after",
    "x  <tool>y</tool>  z",
    "a word here, words, sword, word.",
    "word",
    " word ",
    "hi there, hi  there, hi therefore",
    "[INST] question [/INST] answer",
]


def random_texts(n: int, seed: int) -> list[str]:
    """Random splices of the sentences and hand texts: cut at any character, glue with
    whitespace runs or special tokens, so boundaries land everywhere."""
    rng = random.Random(seed)
    pool = SENTENCES + HAND_TEXTS + SPECIAL_TEXTS
    glue = ["", " ", "  ", "\n", "\t", "   \n  ", "<s>", "<|im_end|>", "</think>", "<tool>"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 4)):
            s = rng.choice(pool)
            i = rng.randint(0, len(s))
            j = rng.randint(i, min(len(s), i + 40))
            parts.append(s[i:j])
            parts.append(rng.choice(glue))
        out.append("".join(parts))
    return out
