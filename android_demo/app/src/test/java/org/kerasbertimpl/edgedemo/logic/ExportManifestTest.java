package org.kerasbertimpl.edgedemo.logic;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.Test;

/** export.json of a real `kbert export` as the app reads it, and the refusals the screen shows. */
public class ExportManifestTest {

    private static String manifestText() throws Exception {
        return Golden.readFile(Golden.exportDir() + "/" + ExportContract.MANIFEST);
    }

    @Test
    public void theRealExportHasEverythingTheAppBundles() throws Exception {
        ExportManifest m = ExportManifest.parse(manifestText());
        assertEquals(ExportContract.HEAD, m.head);
        assertEquals(List.of(ExportContract.ID_INPUTS), m.idInputs);
        for (String key : ExportContract.BUNDLED_FILE_KEYS) {
            assertTrue(key, new File(Golden.exportDir(), m.file(key)).isFile());
        }
        for (String name : new String[] {ExportContract.VOCABULARY, ExportContract.LABELS}) {
            assertTrue(name, new File(Golden.exportDir(), name).isFile());
        }
        List<String> labels = Files.readAllLines(Paths.get(Golden.exportDir(), ExportContract.LABELS), StandardCharsets.UTF_8);
        assertEquals(labels, m.labelNames);
        WordPieceTokenizer t = Golden.tokenizer();
        assertEquals(m.lowercase, t.lowercase());
        assertEquals((Integer) t.padId, m.specialIds.get("pad"));
        assertEquals((Integer) t.unkId, m.specialIds.get("unk"));
        assertEquals((Integer) t.clsId, m.specialIds.get("cls"));
        assertEquals((Integer) t.sepId, m.specialIds.get("sep"));
    }

    private static void refused(String json, String reason) {
        try {
            ExportManifest.parse(json);
            fail("accepted: " + json.substring(0, Math.min(80, json.length())));
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains(reason));
        }
    }

    @Test
    public void modelsTheAppCannotShowAreRefusedWithAReason() throws Exception {
        String real = manifestText();
        refused(real.replace("\"head\": \"classifier\"", "\"head\": \"embedder\""), "not a classifier");
        refused(real.replace("\"pair\": false", "\"pair\": true"), "sentence pairs");
        refused(real.replace("\"sequence_length\"", "\"renamed\""), "no \"sequence_length\"");
        refused(real.substring(0, real.length() / 2), "not valid JSON");
        refused("[1, 2]", "not valid JSON");
        ExportManifest m = ExportManifest.parse(real);
        try {
            m.file("tflite_bfloat16");
            fail();
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("lists no \"tflite_bfloat16\" file"));
        }
    }
}
