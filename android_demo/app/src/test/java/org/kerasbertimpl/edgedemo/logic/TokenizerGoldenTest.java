package org.kerasbertimpl.edgedemo.logic;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/** WordPieceTokenizer against BertPreprocessor's ids, written by the Python pipeline. */
public class TokenizerGoldenTest {

    @Test
    public void hardCasesGiveBertPreprocessorsIds() throws Exception {
        WordPieceTokenizer t = Golden.tokenizer();
        List<String> wrong = new ArrayList<>();
        List<Map<String, Object>> cases = Golden.rows("hard_cases");
        for (Map<String, Object> c : cases) {
            int length = ((Double) c.get("sequence_length")).intValue();
            EncodedText x = c.containsKey("text_b")
                    ? t.encodePair((String) c.get("text"), (String) c.get("text_b"), length)
                    : t.encode((String) c.get("text"), length);
            if (!Arrays.equals(x.ids, Golden.ints(c.get("token_ids")))
                    || !Arrays.equals(x.segmentIds, Golden.ints(c.get("segment_ids")))
                    || !Arrays.equals(x.mask, Golden.ints(c.get("padding_mask")))) {
                wrong.add(c.get("name") + ": got " + Arrays.toString(x.ids) + " want " + c.get("token_ids"));
            }
        }
        assertTrue("no hard cases in the golden file", cases.size() >= 50);
        assertTrue(wrong.size() + " of " + cases.size() + " hard cases differ:\n" + String.join("\n", wrong), wrong.isEmpty());
    }

    @Test
    @SuppressWarnings("unchecked")
    public void mrSentencesGiveBertPreprocessorsIds() throws Exception {
        WordPieceTokenizer t = Golden.tokenizer();
        Map<String, Object> mr = (Map<String, Object>) Golden.get().get("mr");
        List<Object> texts = (List<Object>) mr.get("texts");
        List<Object> ids = (List<Object>) mr.get("token_ids");
        int length = ((Double) mr.get("sequence_length")).intValue();
        List<String> wrong = new ArrayList<>();
        for (int i = 0; i < texts.size(); i++) {
            EncodedText x = t.encode((String) texts.get(i), length);
            int[] want = Golden.ints(ids.get(i));
            if (!Arrays.equals(x.ids, want)) {
                wrong.add(texts.get(i) + "\n  got  " + Arrays.toString(x.ids) + "\n  want " + Arrays.toString(want));
            }
            int used = 0;
            for (int id : want) {
                used += id != t.padId ? 1 : 0;
            }
            assertEquals(used, x.usedLength());
        }
        assertTrue("too few MR sentences: " + texts.size(), texts.size() >= 500);
        assertTrue(wrong.size() + " of " + texts.size() + " MR sentences differ, first:\n"
                + String.join("\n", wrong.subList(0, Math.min(5, wrong.size()))), wrong.isEmpty());
        System.out.println("MR sentences with ids equal to BertPreprocessor's: " + texts.size() + " of " + texts.size());
    }

    @Test
    @SuppressWarnings("unchecked")
    public void codepointsInsideAWordAndAloneGiveBertPreprocessorsIds() throws Exception {
        // "ab{c}cd {c}" for every BMP codepoint and every 7th above: the character table's
        // every rule (deleted, space, folded, split, kept) against the pipeline.
        WordPieceTokenizer t = Golden.tokenizer();
        Map<String, Object> golden = (Map<String, Object>) Golden.get().get("codepoints");
        int[] codepoints = Golden.ints(golden.get("codepoints"));
        List<Object> ids = (List<Object>) golden.get("token_ids");
        List<String> wrong = new ArrayList<>();
        for (int i = 0; i < codepoints.length; i++) {
            String text = new StringBuilder("ab").appendCodePoint(codepoints[i]).append("cd ")
                    .appendCodePoint(codepoints[i]).toString();
            int[] want = Golden.ints(ids.get(i));
            int[] got = t.tokenize(text, Integer.MAX_VALUE);
            if (!Arrays.equals(got, want)) {
                wrong.add(String.format("U+%04X: got %s want %s", codepoints[i], Arrays.toString(got), Arrays.toString(want)));
            }
        }
        assertTrue("too few codepoints: " + codepoints.length, codepoints.length > 200_000);
        assertTrue(wrong.size() + " of " + codepoints.length + " codepoints differ, first:\n"
                + String.join("\n", wrong.subList(0, Math.min(10, wrong.size()))), wrong.isEmpty());
        System.out.println("codepoints with ids equal to BertPreprocessor's: " + codepoints.length + " of " + codepoints.length);
    }

    @Test
    public void exportManifestsGoldenSentencesGiveItsIds() throws Exception {
        // export.json carries a few sentences with the ids our tokenizer gave them at export time.
        ExportManifest m = ExportManifest.parse(Golden.readFile(Golden.exportDir() + "/" + ExportContract.MANIFEST));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> golden = (List<Map<String, Object>>) MiniJson.parseObject(
                Golden.readFile(Golden.exportDir() + "/" + ExportContract.MANIFEST)).get("golden");
        assertTrue(golden.size() > 0);
        for (Map<String, Object> g : golden) {
            int[] want = Golden.ints(g.get("ids"));
            EncodedText x = Golden.tokenizer().encode((String) g.get("input"), m.sequenceLength);
            assertArrayEquals((String) g.get("input"), want, Arrays.copyOf(x.ids, want.length));
        }
    }

    @Test
    public void badInputGivesBertPreprocessorsIds() throws Exception {
        WordPieceTokenizer t = Golden.tokenizer();
        for (Map<String, Object> c : Golden.rows("bad_input")) {
            int length = ((Double) c.get("sequence_length")).intValue();
            assertArrayEquals((String) c.get("name"), Golden.ints(c.get("token_ids")), t.encode((String) c.get("text"), length).ids);
        }
    }

    @Test
    public void pairTruncationIsGooglesTruncateSeqPair() {
        // Google's loop, run step by step, against the closed form the tokenizer uses.
        for (int budget = 1; budget < 40; budget++) {
            for (int a = 0; a < 50; a++) {
                for (int b = 0; b < 50; b++) {
                    int la = a;
                    int lb = b;
                    while (la + lb > budget) {
                        if (la > lb) {
                            la--;
                        } else {
                            lb--;
                        }
                    }
                    assertArrayEquals(new int[] {la, lb}, WordPieceTokenizer.truncatePairLengths(a, b, budget));
                }
            }
        }
    }
}
