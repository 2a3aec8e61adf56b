package org.kerasbertimpl.edgedemo.logic;

import java.util.Locale;

/**
 * Input limits and the messages for bad input, decided before any model runs: empty text, a
 * text too long to paste, text the tokenizer reads nothing from, text the vocabulary does not
 * know, text longer than the sequence. The verdict carries the packed ids the LiteRT path
 * feeds; the MediaPipe path tokenizes for itself and uses only the messages.
 *
 * <p>Example: {@code InputCheck.Verdict v = InputCheck.check(text, tokenizer, 64); if (!v.ok) show(v.message);}
 */
public final class InputCheck {
    /** Longer pastes are refused: the model reads only its first pieces, and the screen stays responsive. */
    public static final int MAX_INPUT_CHARS = 50_000;

    private InputCheck() {}

    /** ok: classify (message may still hold a note); !ok: show message instead of a result. */
    public static final class Verdict {
        public final boolean ok;
        public final String message;
        public final EncodedText encoded;

        Verdict(boolean ok, String message, EncodedText encoded) {
            this.ok = ok;
            this.message = message;
            this.encoded = encoded;
        }
    }

    public static Verdict check(String text, WordPieceTokenizer tokenizer, int sequenceLength) {
        if (text == null || text.trim().isEmpty()) {
            return new Verdict(false, "Type or paste some text to classify.", null);
        }
        // Characters are code points (an emoji is one), as the message says.
        int chars = text.codePointCount(0, text.length());
        if (chars > MAX_INPUT_CHARS) {
            return new Verdict(false, String.format(Locale.ROOT,
                    "The text has %,d characters; paste at most %,d (the model reads only its first %d word pieces).",
                    chars, MAX_INPUT_CHARS, sequenceLength - 2), null);
        }
        EncodedText encoded = tokenizer.encode(text, sequenceLength);
        if (encoded.keptPieces == 0) {
            return new Verdict(false, "Nothing to classify: the text holds only characters BERT ignores "
                    + "(spaces, control or format characters).", null);
        }
        String note = "";
        if (encoded.unknownPieces == encoded.keptPieces) {
            note = String.format(Locale.ROOT, "The vocabulary knows none of this text (all %d word pieces are [UNK]): "
                    + "the label is a guess.", encoded.keptPieces);
        } else if (2 * encoded.unknownPieces >= encoded.keptPieces) {
            note = String.format(Locale.ROOT, "Much of this text is outside the vocabulary (%d of %d word pieces "
                    + "are [UNK]).", encoded.unknownPieces, encoded.keptPieces);
        }
        if (encoded.truncated) {
            String cut = String.format(Locale.ROOT, "Long text: the model reads its first %d word pieces, as in "
                    + "training; the rest is ignored.", sequenceLength - 2);
            note = note.isEmpty() ? cut : note + " " + cut;
        }
        return new Verdict(true, note, encoded);
    }
}
