package org.kerasbertimpl.edgedemo.logic;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.List;
import java.util.Map;
import org.junit.Test;

public class MiniJsonTest {
    @Test
    public void valuesAndEscapes() {
        Map<String, Object> m = MiniJson.parseObject(
                "{\"a\": [1, -2.5e3, true, false, null], \"s\": \"q\\\"\\\\\\/\\n\\t\\u00e9\\ud83d\\ude00\", \"o\": {}}");
        assertEquals(List.of(1.0, -2500.0, true, false), ((List<?>) m.get("a")).subList(0, 4));
        assertNull(((List<?>) m.get("a")).get(4));
        assertEquals("q\"\\/\n\t\u00e9\ud83d\ude00", m.get("s"));
        assertTrue(((Map<?, ?>) m.get("o")).isEmpty());
    }

    @Test
    public void badJsonSaysWhere() {
        for (String bad : new String[] {"", "{", "{\"a\" 1}", "[1,]", "{\"a\": tru}", "\"abc", "{} x"}) {
            try {
                MiniJson.parse(bad);
                fail("accepted " + bad);
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage(), e.getMessage().startsWith("Bad JSON at offset"));
            }
        }
    }
}
