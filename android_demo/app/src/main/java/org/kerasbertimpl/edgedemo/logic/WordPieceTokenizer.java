package org.kerasbertimpl.edgedemo.logic;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * BERT WordPiece tokenization and packing that gives BertPreprocessor's ids, for the app's
 * LiteRT path (the token-id .tflite written by {@code kbert export}).
 *
 * <p>The steps are BertPreprocessor's (keras_bert_impl/tokenization/bert_preprocessor.py):
 * clean (drop control/format characters, map whitespace to a space), for uncased
 * vocabularies strip accents and lower-case, split on whitespace and around punctuation and
 * CJK ideographs, then greedy longest-match WordPiece with "##" continuations; a word of more
 * than maxCharsPerWord characters, or one WordPiece cannot cover, is one [UNK]. Every
 * per-character decision comes from {@link BertCharTable}. Single texts are packed as
 * [CLS] A [SEP], pairs as [CLS] A [SEP] B [SEP] with Google's _truncate_seq_pair.
 *
 * <p>Tokenization stops once the sequence is full, so a pasted 10,000-character text costs
 * no more than the pieces the model can read.
 *
 * <p>Example:
 * <pre>{@code
 * WordPieceTokenizer t = new WordPieceTokenizer(WordPieceTokenizer.readVocabulary(in), table, true, 100);
 * EncodedText x = t.encode("a gorgeous, witty, seductive movie.", 64);  // x.ids[0] == 101 ([CLS])
 * }</pre>
 */
public final class WordPieceTokenizer {
    public static final int DEFAULT_MAX_CHARS_PER_WORD = 100;
    private static final String SUFFIX = "##";

    private final Map<String, Integer> vocabulary;
    private final BertCharTable table;
    private final boolean lowercase;
    private final int maxCharsPerWord;
    public final int padId;
    public final int unkId;
    public final int clsId;
    public final int sepId;

    public WordPieceTokenizer(List<String> tokens, BertCharTable table, boolean lowercase, int maxCharsPerWord) {
        if (tokens == null || tokens.isEmpty()) {
            throw new IllegalArgumentException("The vocabulary is empty: is vocab.txt missing from the model folder?");
        }
        if (maxCharsPerWord < 1) {
            throw new IllegalArgumentException("maxCharsPerWord must be >= 1. Received: " + maxCharsPerWord);
        }
        this.vocabulary = new HashMap<>(2 * tokens.size());
        for (int i = 0; i < tokens.size(); i++) {
            // The first occurrence wins, as in tensorflow-text's vocabulary lookup.
            this.vocabulary.putIfAbsent(tokens.get(i), i);
        }
        this.table = table;
        this.lowercase = lowercase;
        this.maxCharsPerWord = maxCharsPerWord;
        this.padId = special(tokens, "[PAD]");
        this.unkId = special(tokens, "[UNK]");
        this.clsId = special(tokens, "[CLS]");
        this.sepId = special(tokens, "[SEP]");
    }

    private int special(List<String> tokens, String name) {
        Integer id = vocabulary.get(name);
        if (id == null) {
            throw new IllegalArgumentException("The vocabulary has no " + name + " token (" + tokens.size()
                    + " tokens read): is this a BERT vocab.txt?");
        }
        return id;
    }

    /** vocab.txt: one token per line, UTF-8 (a trailing '\r' is dropped, as Python's reader does). */
    public static List<String> readVocabulary(InputStream in) throws IOException {
        BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        List<String> tokens = new ArrayList<>();
        String line;
        while ((line = reader.readLine()) != null) {
            tokens.add(line);
        }
        return tokens;
    }

    public boolean lowercase() {
        return lowercase;
    }


    /**
     * Word-piece ids of text, at most maxPieces of them (the first ones; tokenization stops
     * there). A null text is treated as empty.
     */
    public int[] tokenize(String text, int maxPieces) {
        IntList out = new IntList();
        if (text == null || maxPieces <= 0) {
            return out.toArray();
        }
        IntList word = new IntList();
        int i = 0;
        while (i < text.length() && out.size < maxPieces) {
            int cp = text.codePointAt(i);
            i += Character.charCount(cp);
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                // A lone surrogate is not a character (malformed UTF-16); BERT's cleaning drops
                // U+FFFD, which is what a UTF-8 round trip would turn it into.
                continue;
            }
            if (table.isRemoved(cp)) {
                continue;
            }
            int[] folded = lowercase && !table.isSpace(cp) ? table.fold(cp) : null;
            if (folded == null) {
                accept(cp, word, out);
            } else {
                for (int c : folded) {
                    accept(c, word, out);
                }
            }
        }
        wordPieces(word, out);
        if (out.size > maxPieces) {
            out.size = maxPieces;
        }
        return out.toArray();
    }

    private void accept(int cp, IntList word, IntList out) {
        if (table.isSpace(cp)) {
            wordPieces(word, out);
        } else if (table.isSplit(cp)) {
            wordPieces(word, out);
            word.add(cp);
            wordPieces(word, out);
        } else {
            word.add(cp);
        }
    }

    /** Appends the pieces of the word held in `word` to out and empties `word`. */
    private void wordPieces(IntList word, IntList out) {
        int n = word.size;
        if (n == 0) {
            return;
        }
        int[] cps = word.data;
        word.size = 0;
        if (n > maxCharsPerWord) {
            out.add(unkId);
            return;
        }
        int mark = out.size;
        int start = 0;
        while (start < n) {
            int end = n;
            Integer id = null;
            while (start < end) {
                String piece = new String(cps, start, end - start);
                id = vocabulary.get(start > 0 ? SUFFIX + piece : piece);
                if (id != null) {
                    break;
                }
                end--;
            }
            if (id == null) {
                out.size = mark;
                out.add(unkId);
                return;
            }
            out.add(id);
            start = end;
        }
    }

    /** [CLS] text [SEP] [PAD]... at sequenceLength, as BertPreprocessor packs one segment. */
    public EncodedText encode(String text, int sequenceLength) {
        checkLength(sequenceLength, 3);
        int budget = sequenceLength - 2;
        int[] a = tokenize(text, budget + 1);  // one more than fits tells whether it was truncated
        int keep = Math.min(a.length, budget);
        return pack(Arrays.copyOf(a, keep), null, sequenceLength, a.length, a.length > budget);
    }

    /** [CLS] a [SEP] b [SEP] [PAD]..., truncated like Google's _truncate_seq_pair. */
    public EncodedText encodePair(String textA, String textB, int sequenceLength) {
        checkLength(sequenceLength, 4);
        int budget = sequenceLength - 3;
        // Pieces beyond the budget never change the kept lengths (see truncatePairLengths).
        int[] a = tokenize(textA, budget + 1);
        int[] b = tokenize(textB, budget + 1);
        int[] keep = truncatePairLengths(a.length, b.length, budget);
        boolean truncated = keep[0] < a.length || keep[1] < b.length;
        return pack(Arrays.copyOf(a, keep[0]), Arrays.copyOf(b, keep[1]), sequenceLength, a.length + b.length, truncated);
    }

    /**
     * Lengths Google's _truncate_seq_pair leaves (trim the longer segment one piece at a time,
     * segment B on ties), in closed form: a = min(la, max(budget - lb, ceil(budget / 2))),
     * b = min(lb, budget - a). Lengths capped at budget give the same result.
     */
    public static int[] truncatePairLengths(int lengthA, int lengthB, int budget) {
        int keepA = Math.min(lengthA, Math.max(budget - lengthB, (budget + 1) / 2));
        int keepB = Math.min(lengthB, budget - keepA);
        return new int[] {keepA, keepB};
    }

    private static void checkLength(int sequenceLength, int minimum) {
        if (sequenceLength < minimum) {
            throw new IllegalArgumentException("sequenceLength must be >= " + minimum + ". Received: " + sequenceLength);
        }
    }

    private EncodedText pack(int[] a, int[] b, int sequenceLength, int pieces, boolean truncated) {
        int[] ids = new int[sequenceLength];
        int[] mask = new int[sequenceLength];
        int[] segments = new int[sequenceLength];
        Arrays.fill(ids, padId);
        int n = 0;
        ids[n++] = clsId;
        for (int id : a) {
            ids[n++] = id;
        }
        ids[n++] = sepId;
        int unknown = count(a, unkId);
        int kept = a.length;
        if (b != null) {
            int startB = n;
            for (int id : b) {
                ids[n++] = id;
            }
            ids[n++] = sepId;
            Arrays.fill(segments, startB, n, 1);
            unknown += count(b, unkId);
            kept += b.length;
        }
        Arrays.fill(mask, 0, n, 1);
        return new EncodedText(ids, mask, segments, pieces, kept, unknown, truncated);
    }

    private static int count(int[] values, int target) {
        int n = 0;
        for (int v : values) {
            if (v == target) {
                n++;
            }
        }
        return n;
    }

    /** A growable int array (no boxing on the per-character path). */
    static final class IntList {
        int[] data = new int[32];
        int size;

        void add(int value) {
            if (size == data.length) {
                data = Arrays.copyOf(data, 2 * size);
            }
            data[size++] = value;
        }

        int[] toArray() {
            return Arrays.copyOf(data, size);
        }
    }
}
