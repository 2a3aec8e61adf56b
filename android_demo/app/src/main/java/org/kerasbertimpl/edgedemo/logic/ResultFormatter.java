package org.kerasbertimpl.edgedemo.logic;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The text the screen shows for a prediction: the label line, one bar line per label, the latency.
 * Numbers use Locale.ROOT so the golden strings do not depend on the phone's language.
 */
public final class ResultFormatter {
    private ResultFormatter() {}

    public static String percent(float probability) {
        return String.format(Locale.ROOT, "%.1f%%", 100.0 * probability);
    }

    /** "8.2 ms", "0.35 ms" under a millisecond, "1.25 s" from a second on. */
    public static String latency(long nanos) {
        if (nanos < 0) {
            throw new IllegalArgumentException("latency must be >= 0. Received: " + nanos);
        }
        double ms = nanos / 1e6;
        if (ms < 1) {
            return String.format(Locale.ROOT, "%.2f ms", ms);
        }
        if (ms < 1000) {
            return String.format(Locale.ROOT, "%.1f ms", ms);
        }
        return String.format(Locale.ROOT, "%.2f s", ms / 1000);
    }

    /** A text bar of `width` cells, rounded to the nearest cell. */
    public static String bar(float probability, int width) {
        int filled = Math.round(probability * width);
        filled = Math.max(0, Math.min(width, filled));
        StringBuilder s = new StringBuilder(width);
        for (int i = 0; i < width; i++) {
            s.append(i < filled ? '\u2588' : '\u00b7');
        }
        return s.toString();
    }

    /** "positive 97.4%" or "unsure: positive 55.0%" under the threshold. */
    public static String headline(Classification c) {
        String line = c.topLabel() + " " + percent(c.topProbability());
        return c.confident() ? line : "unsure: " + line;
    }

    /** One line per label in label order: name, bar, percentage. */
    public static List<String> bars(Classification c, int width) {
        int nameWidth = 0;
        for (String label : c.labels) {
            nameWidth = Math.max(nameWidth, label.length());
        }
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < c.labels.size(); i++) {
            String name = String.format(Locale.ROOT, "%-" + nameWidth + "s", c.labels.get(i));
            lines.add(name + " " + bar(c.probabilities[i], width) + " " + percent(c.probabilities[i]));
        }
        return lines;
    }
}
