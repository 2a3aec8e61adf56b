package org.kerasbertimpl.edgedemo.logic;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the app reads from export.json: the model's name, head, sequence length, casing,
 * label names, special ids and file paths. Anything the app cannot use is refused here with
 * a message the screen can show (not a classifier, a pair model, a file missing).
 *
 * <p>Example: {@code ExportManifest m = ExportManifest.parse(readAll(assets.open("model/export.json")));}
 */
public final class ExportManifest {
    public final String name;
    public final String head;
    public final int sequenceLength;
    public final boolean lowercase;
    public final List<String> labelNames;
    public final List<String> idInputs;
    public final Map<String, Integer> specialIds;
    public final Map<String, String> files;

    private ExportManifest(String name, String head, int sequenceLength, boolean lowercase, List<String> labelNames,
                           List<String> idInputs, Map<String, Integer> specialIds, Map<String, String> files) {
        this.name = name;
        this.head = head;
        this.sequenceLength = sequenceLength;
        this.lowercase = lowercase;
        this.labelNames = labelNames;
        this.idInputs = idInputs;
        this.specialIds = specialIds;
        this.files = files;
    }

    /** Parses export.json; IllegalArgumentException with a readable reason when the app cannot use it. */
    public static ExportManifest parse(String json) {
        Map<String, Object> m;
        try {
            m = MiniJson.parseObject(json);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("export.json is not valid JSON (" + e.getMessage()
                    + "): copy a folder written by `kbert export`.", e);
        }
        String head = string(m, "head");
        if (!ExportContract.HEAD.equals(head)) {
            throw new IllegalArgumentException("This export is a " + head + ", not a classifier: the demo shows "
                    + "labels and probabilities, so export a `kbert finetune --task classification` run.");
        }
        if (Boolean.TRUE.equals(m.get("pair"))) {
            throw new IllegalArgumentException("This classifier takes sentence pairs; the demo classifies one text.");
        }
        int sequenceLength = integer(m, "sequence_length");
        if (sequenceLength < 3) {
            throw new IllegalArgumentException("export.json sequence_length must be >= 3. Received: " + sequenceLength);
        }
        List<String> labels = strings(m, "label_names");
        if (labels.size() < 2) {
            throw new IllegalArgumentException("export.json lists " + labels.size() + " label(s); a classifier has >= 2.");
        }
        Map<String, Integer> special = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : object(m, "special_ids").entrySet()) {
            special.put(e.getKey(), toInt(e.getValue(), "special_ids." + e.getKey()));
        }
        Map<String, String> files = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : object(m, "files").entrySet()) {
            if (!(e.getValue() instanceof String)) {
                throw new IllegalArgumentException("export.json files." + e.getKey() + " is not a path");
            }
            files.put(e.getKey(), (String) e.getValue());
        }
        Object lowercase = m.get("lowercase");
        if (!(lowercase instanceof Boolean)) {
            throw new IllegalArgumentException("export.json has no boolean \"lowercase\"");
        }
        return new ExportManifest(string(m, "name"), head, sequenceLength, (Boolean) lowercase,
                Collections.unmodifiableList(labels), Collections.unmodifiableList(strings(m, "id_inputs")),
                Collections.unmodifiableMap(special), Collections.unmodifiableMap(files));
    }

    /** The relative path of a file key (e.g. ExportContract.MEDIAPIPE_INT8), or a message why there is none. */
    public String file(String key) {
        String path = files.get(key);
        if (path == null) {
            throw new IllegalArgumentException("export.json lists no \"" + key + "\" file (it has " + files.keySet()
                    + "): export with the formats and quantizations the app uses.");
        }
        return path;
    }

    private static Object required(Map<String, Object> m, String key) {
        if (!m.containsKey(key)) {
            throw new IllegalArgumentException("export.json has no \"" + key + "\": is it from `kbert export`?");
        }
        return m.get(key);
    }

    private static String string(Map<String, Object> m, String key) {
        Object v = required(m, key);
        if (!(v instanceof String)) {
            throw new IllegalArgumentException("export.json \"" + key + "\" is not a string");
        }
        return (String) v;
    }

    private static int integer(Map<String, Object> m, String key) {
        return toInt(required(m, key), key);
    }

    private static int toInt(Object v, String what) {
        if (!(v instanceof Double) || ((Double) v) != Math.rint((Double) v)) {
            throw new IllegalArgumentException("export.json \"" + what + "\" is not an integer: " + v);
        }
        return ((Double) v).intValue();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Map<String, Object> m, String key) {
        Object v = required(m, key);
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("export.json \"" + key + "\" is not an object");
        }
        return (Map<String, Object>) v;
    }

    private static List<String> strings(Map<String, Object> m, String key) {
        Object v = required(m, key);
        if (!(v instanceof List)) {
            throw new IllegalArgumentException("export.json \"" + key + "\" is not a list");
        }
        List<String> out = new ArrayList<>();
        for (Object item : (List<?>) v) {
            if (!(item instanceof String)) {
                throw new IllegalArgumentException("export.json \"" + key + "\" holds a non-string: " + item);
            }
            out.add((String) item);
        }
        return out;
    }
}
