package org.kerasbertimpl.edgedemo.logic;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/** Softmax, label mapping and threshold against the Keras model's logits and probabilities. */
public class ClassificationTest {

    @SuppressWarnings("unchecked")
    private static List<String> labels() throws Exception {
        return (List<String>) (List<?>) Golden.get().get("labels");
    }

    @Test
    public void softmaxAndTopLabelMatchTheKerasModel() throws Exception {
        List<Map<String, Object>> rows = Golden.rows("logits");
        assertTrue(rows.size() >= 10);
        double worst = 0;
        for (Map<String, Object> row : rows) {
            float[] want = Golden.floats(row.get("probabilities"));
            Classification c = Classification.fromLogits(Golden.floats(row.get("logits")), labels(), 0.5f);
            for (int i = 0; i < want.length; i++) {
                worst = Math.max(worst, Math.abs(c.probabilities[i] - want[i]));
            }
            assertEquals((String) row.get("text"), row.get("label"), c.topLabel());
        }
        // float32 results of a float64 softmax: a few ulps of 1.
        assertTrue("max probability difference " + worst, worst < 1e-6);
        System.out.println("softmax vs Keras: " + rows.size() + " sentences, max probability difference " + worst);
    }

    @Test
    public void extremeLogitsStayFinite() {
        float[] p = Classification.softmax(new float[] {1000f, -1000f, 0f});
        assertEquals(1f, p[0], 0f);
        assertEquals(0f, p[1], 0f);
        assertFalse(Float.isNaN(p[2]));
    }

    @Test
    public void thresholdMarksUnsurePredictions() throws Exception {
        Classification c = Classification.fromProbabilities(new float[] {0.45f, 0.55f}, labels(), 0.6f);
        assertEquals(1, c.top);
        assertFalse(c.confident());
        assertTrue(Classification.fromProbabilities(new float[] {0.45f, 0.55f}, labels(), 0.55f).confident());
    }

    @Test
    public void notADistributionIsRefusedWithAReason() throws Exception {
        float[][] bad = {{0.9f, 0.9f}, {-1.75f, 1.88f}, {Float.NaN, 1f}, {1f}};
        String[] reason = {"sum to", "outside [0, 1]", "non-finite", "labels.txt has 2"};
        for (int i = 0; i < bad.length; i++) {
            try {
                Classification.fromProbabilities(bad[i], labels(), 0.5f);
                fail("accepted " + Arrays.toString(bad[i]));
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage(), e.getMessage().contains(reason[i]));
            }
        }
    }
}
