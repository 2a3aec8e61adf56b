package org.kerasbertimpl.edgedemo.logic;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;

/**
 * The golden vectors the Python pipeline writes (tests/export/test_android_logic.py): the
 * file is named by the system property "golden"; the export folder it was made from by "export".
 */
final class Golden {
    private static Map<String, Object> golden;
    private static WordPieceTokenizer tokenizer;

    private Golden() {}

    static synchronized Map<String, Object> get() throws IOException {
        if (golden == null) {
            String path = System.getProperty("golden");
            if (path == null) {
                throw new IllegalStateException("Run through tests/export/test_android_logic.py: it writes the golden "
                        + "vectors from the Python pipeline and passes -Dgolden=PATH -Dexport=DIR.");
            }
            golden = MiniJson.parseObject(new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8));
        }
        return golden;
    }

    static String exportDir() {
        String dir = System.getProperty("export");
        if (dir == null) {
            throw new IllegalStateException("-Dexport=DIR (a kbert export folder) is missing");
        }
        return dir;
    }

    /** The tokenizer as the app builds it: the export's vocab.txt and casing, the app's character table. */
    static synchronized WordPieceTokenizer tokenizer() throws IOException {
        if (tokenizer == null) {
            Map<String, Object> g = get();
            List<String> vocabulary;
            try (InputStream in = new FileInputStream((String) g.get("vocabulary"))) {
                vocabulary = WordPieceTokenizer.readVocabulary(in);
            }
            BertCharTable table;
            try (InputStream in = new FileInputStream((String) g.get("char_table"))) {
                table = BertCharTable.read(in);
            }
            tokenizer = new WordPieceTokenizer(vocabulary, table, (Boolean) g.get("lowercase"),
                    WordPieceTokenizer.DEFAULT_MAX_CHARS_PER_WORD);
        }
        return tokenizer;
    }

    static int[] ints(Object list) {
        List<?> values = (List<?>) list;
        int[] out = new int[values.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = ((Double) values.get(i)).intValue();
        }
        return out;
    }

    static float[] floats(Object list) {
        List<?> values = (List<?>) list;
        float[] out = new float[values.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = ((Double) values.get(i)).floatValue();
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> rows(String key) throws IOException {
        return (List<Map<String, Object>>) get().get(key);
    }

    static String readFile(String path) throws IOException {
        return new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8);
    }
}
