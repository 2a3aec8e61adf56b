package org.kerasbertimpl.edgedemo.logic;

/**
 * Everything the app expects of the folder {@code kbert export} writes (docs/export.md), in
 * one place. tests/export/test_android_logic.py holds these values to a real export: asset
 * names, manifest keys, tensor names, shapes, dtypes and MediaPipe metadata.
 * {@code java ...ExportContract} prints them as JSON for that test.
 */
public final class ExportContract {
    private ExportContract() {}

    /** The Gradle task copyKbertExport copies the export's files here, under app/src/main/assets/. */
    public static final String ASSET_DIR = "model";
    public static final String MANIFEST = "export.json";
    public static final String VOCABULARY = "vocab.txt";
    public static final String LABELS = "labels.txt";
    /** The app's own asset (not from the export): BERT's character rules for WordPieceTokenizer. */
    public static final String CHAR_TABLE = "bert_unicode.txt";

    /** export.json "head" of a model the app can show. */
    public static final String HEAD = "classifier";
    /** export.json "files" keys of the MediaPipe classifiers: float32 and dynamic-range int8. */
    public static final String MEDIAPIPE_FLOAT32 = "mediapipe";
    public static final String MEDIAPIPE_INT8 = "mediapipe_int8";
    /** export.json "files" keys of the token-id .tflite files the LiteRT path can run. */
    public static final String LITERT_FLOAT32 = "tflite_float32";
    public static final String LITERT_INT8 = "tflite_dynamic_int8";
    /** The files the Gradle task bundles (the others are SavedModels, int8_mixed, text-in). */
    public static final String[] BUNDLED_FILE_KEYS = {MEDIAPIPE_FLOAT32, MEDIAPIPE_INT8, LITERT_FLOAT32, LITERT_INT8};

    /** The id models' signature and its int32 inputs, in the order the app fills them. */
    public static final String SIGNATURE = "serving_default";
    public static final String[] ID_INPUTS = {"ids", "mask", "segment_ids"};
    public static final String INPUT_DTYPE = "int32";
    /** Outputs of the id .tflite's signature (float32 [batch, labels]); the app reads probabilities. */
    public static final String[] LITERT_OUTPUTS = {"logits", "probabilities"};
    public static final String PROBABILITIES = "probabilities";
    public static final String OUTPUT_DTYPE = "float32";
    /** MediaPipe files: inputs are [1, sequence_length] (export.json), one probabilities output. */
    public static final int MEDIAPIPE_BATCH = 1;
    /** MediaPipe metadata: the input process unit and the files packed in the .tflite. */
    public static final String MEDIAPIPE_TOKENIZER_UNIT = "BertTokenizerOptions";
    public static final String MEDIAPIPE_LABELS_TYPE = "TENSOR_AXIS_LABELS";

    /** The contract as JSON, for the Python contract test. */
    public static String toJson() {
        StringBuilder s = new StringBuilder("{");
        field(s, "asset_dir", ASSET_DIR).append(',');
        field(s, "manifest", MANIFEST).append(',');
        field(s, "vocabulary", VOCABULARY).append(',');
        field(s, "labels", LABELS).append(',');
        field(s, "char_table", CHAR_TABLE).append(',');
        field(s, "head", HEAD).append(',');
        field(s, "mediapipe_float32", MEDIAPIPE_FLOAT32).append(',');
        field(s, "mediapipe_int8", MEDIAPIPE_INT8).append(',');
        field(s, "litert_float32", LITERT_FLOAT32).append(',');
        field(s, "litert_int8", LITERT_INT8).append(',');
        array(s, "bundled_file_keys", BUNDLED_FILE_KEYS).append(',');
        field(s, "signature", SIGNATURE).append(',');
        array(s, "id_inputs", ID_INPUTS).append(',');
        field(s, "input_dtype", INPUT_DTYPE).append(',');
        array(s, "litert_outputs", LITERT_OUTPUTS).append(',');
        field(s, "probabilities", PROBABILITIES).append(',');
        field(s, "output_dtype", OUTPUT_DTYPE).append(',');
        s.append("\"mediapipe_batch\":").append(MEDIAPIPE_BATCH).append(',');
        field(s, "mediapipe_tokenizer_unit", MEDIAPIPE_TOKENIZER_UNIT).append(',');
        field(s, "mediapipe_labels_type", MEDIAPIPE_LABELS_TYPE);
        return s.append('}').toString();
    }

    private static StringBuilder field(StringBuilder s, String key, String value) {
        return s.append('"').append(key).append("\":\"").append(value).append('"');
    }

    private static StringBuilder array(StringBuilder s, String key, String[] values) {
        s.append('"').append(key).append("\":[");
        for (int i = 0; i < values.length; i++) {
            s.append(i > 0 ? "," : "").append('"').append(values[i]).append('"');
        }
        return s.append(']');
    }

    public static void main(String[] args) {
        System.out.println(toJson());
    }
}
