package org.kerasbertimpl.edgedemo.logic;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.util.HashMap;
import java.util.Map;
import org.junit.Test;

/** Bad input in the app logic: a result or a clear message, never an exception. */
public class InputCheckTest {
    private static final int LENGTH = 64;

    private static Map<String, Map<String, Object>> cases() throws Exception {
        Map<String, Map<String, Object>> byName = new HashMap<>();
        for (Map<String, Object> c : Golden.rows("bad_input")) {
            byName.put((String) c.get("name"), c);
        }
        return byName;
    }

    private static InputCheck.Verdict check(String name) throws Exception {
        return InputCheck.check((String) cases().get(name).get("text"), Golden.tokenizer(), LENGTH);
    }

    @Test
    public void emptyAndBlankTextAskForText() throws Exception {
        for (String name : new String[] {"empty", "whitespace"}) {
            InputCheck.Verdict v = check(name);
            assertFalse(name, v.ok);
            assertEquals("Type or paste some text to classify.", v.message);
            assertNull(v.encoded);
        }
        assertFalse(InputCheck.check(null, Golden.tokenizer(), LENGTH).ok);
    }

    @Test
    public void textOfIgnoredCharactersSaysSo() throws Exception {
        InputCheck.Verdict v = check("only_ignored_characters");
        assertFalse(v.ok);
        assertTrue(v.message, v.message.startsWith("Nothing to classify"));
    }

    @Test
    public void emojiAndUnknownScriptAreClassifiedWithANote() throws Exception {
        for (String name : new String[] {"emoji_only", "script_not_in_vocabulary"}) {
            InputCheck.Verdict v = check(name);
            assertTrue(name, v.ok);
            assertTrue(v.message, v.message.startsWith("The vocabulary knows none of this text"));
            assertEquals(v.encoded.keptPieces, v.encoded.unknownPieces);
            assertArrayEquals(Golden.ints(cases().get(name).get("token_ids")), v.encoded.ids);
        }
    }

    @Test
    public void tenThousandCharactersAreTruncatedLikeThePipeline() throws Exception {
        Map<String, Object> c = cases().get("10000_characters");
        String text = (String) c.get("text");
        assertEquals(10_000, text.length());
        InputCheck.Verdict v = InputCheck.check(text, Golden.tokenizer(), LENGTH);
        assertTrue(v.ok);
        assertTrue(v.message, v.message.contains("Long text: the model reads its first 62 word pieces"));
        assertTrue(v.encoded.truncated);
        assertArrayEquals(Golden.ints(c.get("token_ids")), v.encoded.ids);
    }

    @Test
    public void pastesOverTheLimitAreRefusedWithTheLimit() throws Exception {
        StringBuilder s = new StringBuilder();
        while (s.length() <= InputCheck.MAX_INPUT_CHARS) {
            s.append("a fine film . ");
        }
        InputCheck.Verdict v = InputCheck.check(s.toString(), Golden.tokenizer(), LENGTH);
        assertFalse(v.ok);
        assertTrue(v.message, v.message.contains("paste at most 50,000"));
    }

    @Test
    public void theLimitCountsCharactersNotUtf16Units() throws Exception {
        // 30,000 emoji are 60,000 UTF-16 units but 30,000 characters: under the limit.
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < 30_000; i++) {
            s.appendCodePoint(0x1F600);
        }
        InputCheck.Verdict v = InputCheck.check(s.toString(), Golden.tokenizer(), LENGTH);
        assertTrue(v.message, v.ok);
        assertTrue(v.message, v.message.startsWith("The vocabulary knows none of this text"));
    }

    @Test
    public void loneSurrogatesDoNotThrow() throws Exception {
        // Malformed UTF-16 (half an emoji) is dropped like U+FFFD, the rest is classified.
        InputCheck.Verdict v = InputCheck.check("good \ud83d movie", Golden.tokenizer(), LENGTH);
        assertTrue(v.ok);
        assertArrayEquals(Golden.tokenizer().encode("good movie", LENGTH).ids, v.encoded.ids);
    }
}
