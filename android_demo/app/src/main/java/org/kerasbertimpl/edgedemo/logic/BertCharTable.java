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
 * BERT's per-character rules, read from bert_unicode.txt (written by
 * {@code python -m keras_bert_impl.tokenization.char_table}).
 *
 * <p>Why a table and not {@link Character#getType}: Java 17 knows Unicode 13, each Android
 * release its own ICU, while BertPreprocessor follows Python's Unicode 14 tables for cleaning
 * and accents and tensorflow-text's ICU for punctuation. The table pins all of that, so the
 * app's ids equal the pipeline's on every device.
 *
 * <p>Example: {@code BertCharTable t = BertCharTable.read(assets.open("bert_unicode.txt"));}
 */
public final class BertCharTable {
    public static final int FORMAT_VERSION = 1;
    private static final int[] EMPTY = new int[0];

    // Each: sorted, disjoint inclusive ranges, flattened as first0, last0, first1, last1, ...
    private final int[] removed;
    private final int[] space;
    private final int[] split;
    private final Map<Integer, int[]> fold;

    private BertCharTable(int[] removed, int[] space, int[] split, Map<Integer, int[]> fold) {
        this.removed = removed;
        this.space = space;
        this.split = split;
        this.fold = fold;
    }

    /** Reads the table (UTF-8 text); IOException or IllegalArgumentException name the bad line. */
    public static BertCharTable read(InputStream in) throws IOException {
        BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        List<int[]> removed = new ArrayList<>();
        List<int[]> space = new ArrayList<>();
        List<int[]> split = new ArrayList<>();
        Map<Integer, int[]> fold = new HashMap<>();
        String line;
        int number = 0;
        boolean sawHeader = false;
        while ((line = reader.readLine()) != null) {
            number++;
            if (line.isEmpty()) {
                continue;
            }
            if (line.startsWith("#")) {
                if (number == 1) {
                    if (!line.contains("format " + FORMAT_VERSION + ":")) {
                        throw new IllegalArgumentException(
                                "bert_unicode.txt is not format " + FORMAT_VERSION + ": " + line);
                    }
                    sawHeader = true;
                }
                continue;
            }
            String[] parts = line.split(" ");
            try {
                switch (parts[0]) {
                    case "R":
                        removed.add(range(parts));
                        break;
                    case "W":
                        space.add(range(parts));
                        break;
                    case "S":
                        split.add(range(parts));
                        break;
                    case "F":
                        fold.put(Integer.parseInt(parts[1], 16), target(parts[2]));
                        break;
                    default:
                        throw new IllegalArgumentException("unknown tag " + parts[0]);
                }
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("bert_unicode.txt line " + number + " (" + line + "): " + e.getMessage(), e);
            }
        }
        if (!sawHeader) {
            throw new IllegalArgumentException("bert_unicode.txt has no format header: is it the right file?");
        }
        return new BertCharTable(flatten(removed), flatten(space), flatten(split), fold);
    }

    private static int[] range(String[] parts) {
        if (parts.length != 3) {
            throw new IllegalArgumentException("expected TAG FIRST LAST");
        }
        return new int[] {Integer.parseInt(parts[1], 16), Integer.parseInt(parts[2], 16)};
    }

    private static int[] target(String text) {
        if (text.equals("-")) {
            return EMPTY;
        }
        String[] cps = text.split("\\.");
        int[] out = new int[cps.length];
        for (int i = 0; i < cps.length; i++) {
            out[i] = Integer.parseInt(cps[i], 16);
        }
        return out;
    }

    private static int[] flatten(List<int[]> ranges) {
        ranges.sort((a, b) -> Integer.compare(a[0], b[0]));
        int[] out = new int[2 * ranges.size()];
        for (int i = 0; i < ranges.size(); i++) {
            out[2 * i] = ranges.get(i)[0];
            out[2 * i + 1] = ranges.get(i)[1];
            if (i > 0 && out[2 * i] <= out[2 * i - 1]) {
                throw new IllegalArgumentException("overlapping ranges at " + Integer.toHexString(out[2 * i]));
            }
        }
        return out;
    }

    private static boolean inRanges(int[] ranges, int cp) {
        int lo = 0;
        int hi = ranges.length / 2 - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (cp < ranges[2 * mid]) {
                hi = mid - 1;
            } else if (cp > ranges[2 * mid + 1]) {
                lo = mid + 1;
            } else {
                return true;
            }
        }
        return false;
    }

    /** Deleted by BERT's cleaning (NUL, U+FFFD, control and format characters). */
    public boolean isRemoved(int cp) {
        return inRanges(removed, cp);
    }

    /** Separates words without a token of its own. */
    public boolean isSpace(int cp) {
        return inRanges(space, cp);
    }

    /** Split off as a word of its own (punctuation, CJK ideographs). */
    public boolean isSplit(int cp) {
        return inRanges(split, cp);
    }

    /** The uncased form (NFD, accents dropped, lower-cased), or null when it is the character itself. */
    public int[] fold(int cp) {
        return fold.get(cp);
    }

    /** Number of ranges/entries per class, for checks and logs. */
    public String summary() {
        return "removed ranges " + removed.length / 2 + ", space ranges " + space.length / 2
                + ", split ranges " + split.length / 2 + ", folds " + fold.size();
    }

    @Override
    public String toString() {
        return "BertCharTable(" + summary() + ")";
    }

}
