#!/usr/bin/env python3
"""Builds the needle-in-a-haystack set: a 30k- and a 300k-character folder of
Vim user manual chapters with five planted facts, and the five questions.

    needle_set.py OUT

Writes OUT/h30k/ and OUT/h300k/ (chapter_NN.txt) and OUT/questions.json
([[question, expected answer], ...]). Needs the Vim manual under
/usr/share/vim (apt-get install vim-runtime). Used by needle_haystack.sh and
protocols/run.py.
"""

import glob
import json
import os
import sys

FACTS = [
    ("The night-shift supervisor's parking permit number is 58213.",
     "What is the night-shift supervisor's parking permit number?", "58213"),
    ("In 2019 the archivist Marguerite Okafor moved to the city of Tromso.",
     "Which city did Marguerite Okafor move to in 2019?", "Tromso"),
    ("The backup generator in building C is serviced by Halvorsen Electric.",
     "Which company services the backup generator in building C?", "Halvorsen"),
    ("The secret ingredient in the staff canteen's chili is smoked paprika.",
     "What is the secret ingredient in the staff canteen's chili?", "paprika"),
    ("The quarterly budget review meeting takes place in room 4B-217.",
     "In which room does the quarterly budget review meeting take place?", "4B-217"),
]
# Folder name and number of 10,000-character chapters.
SIZES = (("h30k", 3), ("h300k", 30))


def build(out):
    """Writes the haystacks and questions.json under `out`; returns the
    planted facts as [(fact, question, answer, folder, file)]."""
    texts = [open(f, encoding="utf-8", errors="replace").read()
             for f in sorted(glob.glob("/usr/share/vim/vim*/doc/usr_*.txt"))]
    texts = [t for t in texts if len(t) > 12000]
    if not texts:
        sys.exit("no Vim manual under /usr/share/vim (apt-get install vim-runtime)")
    planted = []
    for name, ndocs in SIZES:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        docs = [texts[i % len(texts)][:10000] for i in range(ndocs)]
        for k, (fact, question, answer) in enumerate(FACTS):
            i = (k * ndocs) // len(FACTS) if ndocs > 3 else k % ndocs
            t = docs[i]
            # Spread the facts through each document, on a line of their own.
            cut = t.rfind("\n", 0, max(1, len(t) * (k + 1) // (len(FACTS) + 1)))
            docs[i] = t[:cut] + "\n" + fact + "\n" + t[cut:]
            planted.append((fact, question, answer, name, f"chapter_{i:02d}.txt"))
        for i, t in enumerate(docs):
            with open(os.path.join(d, f"chapter_{i:02d}.txt"), "w") as f:
                f.write(t)
    with open(os.path.join(out, "questions.json"), "w") as f:
        json.dump([[q, a] for _, q, a in FACTS], f)
    return planted


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build(sys.argv[1])
