package org.kerasbertimpl.edgedemo.logic;

import java.util.List;

/**
 * One prediction as the app shows it: a probability per label, the top label, and whether
 * the top probability reaches the confidence threshold.
 *
 * <p>Both runtimes end here: MediaPipe's TextClassifier gives probabilities (category scores
 * by index), the token-id .tflite gives logits and probabilities.
 *
 * <p>Example: {@code Classification c = Classification.fromLogits(new float[] {-1.75f, 1.88f}, labels, 0.6f);}
 */
public final class Classification {
    public final List<String> labels;
    public final float[] probabilities;
    public final int top;
    public final float threshold;

    private Classification(List<String> labels, float[] probabilities, float threshold) {
        this.labels = labels;
        this.probabilities = probabilities;
        this.threshold = threshold;
        int best = 0;
        for (int i = 1; i < probabilities.length; i++) {
            // The first of equal maxima, as numpy's argmax picks it.
            if (probabilities[i] > probabilities[best]) {
                best = i;
            }
        }
        this.top = best;
    }

    /** Softmax in float64 after subtracting the maximum, so large logits neither overflow nor lose the small ones. */
    public static float[] softmax(float[] logits) {
        checkFinite(logits, "logits");
        double max = Double.NEGATIVE_INFINITY;
        for (float v : logits) {
            max = Math.max(max, v);
        }
        double[] e = new double[logits.length];
        double sum = 0;
        for (int i = 0; i < logits.length; i++) {
            e[i] = Math.exp(logits[i] - max);
            sum += e[i];
        }
        float[] out = new float[logits.length];
        for (int i = 0; i < logits.length; i++) {
            out[i] = (float) (e[i] / sum);
        }
        return out;
    }

    public static Classification fromLogits(float[] logits, List<String> labels, float threshold) {
        checkShape(logits, labels, "logits");
        return new Classification(labels, softmax(logits), checkThreshold(threshold));
    }

    /** From a model's probabilities; refuses values that are not a distribution (a wrong output picked). */
    public static Classification fromProbabilities(float[] probabilities, List<String> labels, float threshold) {
        checkShape(probabilities, labels, "probabilities");
        checkFinite(probabilities, "probabilities");
        double sum = 0;
        for (float p : probabilities) {
            if (p < 0f || p > 1f) {
                throw new IllegalArgumentException("A probability outside [0, 1]: " + p
                        + ". Is the model's output logits rather than probabilities?");
            }
            sum += p;
        }
        // float32 softmax outputs sum to 1 within a few ulps per label; 1e-3 leaves room for
        // int8 models while still catching sigmoid (multi-label) outputs, which need not sum to 1.
        if (Math.abs(sum - 1.0) > 1e-3) {
            throw new IllegalArgumentException("The probabilities sum to " + sum + ", not 1: not a softmax classifier.");
        }
        return new Classification(labels, probabilities.clone(), checkThreshold(threshold));
    }

    private static void checkShape(float[] values, List<String> labels, String what) {
        if (values == null || labels == null || values.length != labels.size() || values.length == 0) {
            throw new IllegalArgumentException("The model gave " + (values == null ? 0 : values.length) + " " + what
                    + " but labels.txt has " + (labels == null ? 0 : labels.size()) + " labels.");
        }
    }

    private static void checkFinite(float[] values, String what) {
        for (float v : values) {
            if (Float.isNaN(v) || Float.isInfinite(v)) {
                throw new IllegalArgumentException("The model gave a non-finite value among its " + what + ": " + v);
            }
        }
    }

    private static float checkThreshold(float threshold) {
        if (!(threshold >= 0f && threshold <= 1f)) {
            throw new IllegalArgumentException("threshold must be in [0, 1]. Received: " + threshold);
        }
        return threshold;
    }

    public String topLabel() {
        return labels.get(top);
    }

    public float topProbability() {
        return probabilities[top];
    }

    /** False when the top probability is under the threshold: the screen says the model is unsure. */
    public boolean confident() {
        return probabilities[top] >= threshold;
    }
}
