package org.kerasbertimpl.edgedemo.logic;

import static org.junit.Assert.assertEquals;

import java.util.Arrays;
import java.util.List;
import org.junit.Test;

/** The strings the screen shows. */
public class ResultFormatterTest {
    private static final List<String> LABELS = Arrays.asList("-1", "1");

    @Test
    public void percentagesAndLatencies() {
        assertEquals("97.4%", ResultFormatter.percent(0.974155f));
        assertEquals("0.0%", ResultFormatter.percent(0f));
        assertEquals("100.0%", ResultFormatter.percent(1f));
        assertEquals("0.35 ms", ResultFormatter.latency(350_000L));
        assertEquals("8.2 ms", ResultFormatter.latency(8_200_000L));
        assertEquals("1.25 s", ResultFormatter.latency(1_250_000_000L));
    }

    @Test
    public void barsAndHeadline() {
        Classification c = Classification.fromProbabilities(new float[] {0.025845f, 0.974155f}, LABELS, 0.6f);
        assertEquals("1 97.4%", ResultFormatter.headline(c));
        assertEquals(Arrays.asList("-1 \u00b7\u00b7\u00b7\u00b7\u00b7\u00b7\u00b7\u00b7\u00b7\u00b7 2.6%",
                "1  \u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588 97.4%"), ResultFormatter.bars(c, 10));
        Classification unsure = Classification.fromProbabilities(new float[] {0.45f, 0.55f}, LABELS, 0.6f);
        assertEquals("unsure: 1 55.0%", ResultFormatter.headline(unsure));
        assertEquals("\u2588\u2588\u2588\u2588\u2588\u00b7\u00b7\u00b7\u00b7\u00b7", ResultFormatter.bar(0.5f, 10));
    }
}
